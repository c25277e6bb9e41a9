package pluginrpc_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/hostpb"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/modelproviderpb"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/sandboxruntimepb"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/toolsetpb"
)

var update = flag.Bool("update", false, "record the protocol's descriptors in specs/proto/descriptors.json (refused for a breaking change)")

// descriptorsFile holds the descriptors of every .proto of the plugin
// protocol as compiled plugins were built against them.
const descriptorsFile = "../../../specs/proto/descriptors.json"

// protocolFiles are the generated files of specs/proto.
var protocolFiles = []protoreflect.FileDescriptor{
	toolsetpb.File_toolset_proto,
	modelproviderpb.File_modelprovider_proto,
	sandboxruntimepb.File_sandboxruntime_proto,
	hostpb.File_host_proto,
}

// TestDescriptors compares the protocol's generated descriptors with the
// recorded ones: a compiled plugin speaks the recorded protocol, so every
// recorded file, service, method, message, field, oneof and enum value
// must still be there with the same name, number and type. Additions are
// compatible: -update records them. -update refuses to record a breaking
// change: that is a new package and protocol version, not an edit.
func TestDescriptors(t *testing.T) {
	current := &descriptorpb.FileDescriptorSet{}
	for _, f := range protocolFiles {
		current.File = append(current.File, protodesc.ToFileDescriptorProto(f))
	}
	raw, err := os.ReadFile(descriptorsFile)
	if err != nil && !(*update && os.IsNotExist(err)) {
		t.Fatalf("%v (go test -run TestDescriptors -update writes it)", err)
	}
	recorded := &descriptorpb.FileDescriptorSet{}
	if raw != nil {
		if err := protojson.Unmarshal(raw, recorded); err != nil {
			t.Fatalf("%s: %v", descriptorsFile, err)
		}
	}
	breaks, adds := compareSets(recorded, current)
	for _, b := range breaks {
		t.Errorf("%s: compiled plugins would no longer be understood", b)
	}
	if *update && len(breaks) == 0 {
		if err := os.WriteFile(descriptorsFile, encodeSet(t, current), 0o644); err != nil {
			t.Fatal(err)
		}
		adds = nil
	}
	for _, a := range adds {
		t.Logf("%s: compatible, not yet recorded (go test -run TestDescriptors -update)", a)
	}
}

// encodeSet is set as indented JSON, without source positions, the same
// bytes for the same set.
func encodeSet(t *testing.T, set *descriptorpb.FileDescriptorSet) []byte {
	set = proto.CloneOf(set)
	for _, f := range set.File {
		f.SourceCodeInfo = nil
	}
	b, err := protojson.MarshalOptions{}.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	// protojson varies its spacing on purpose: make it stable.
	var out bytes.Buffer
	if err := json.Indent(&out, compact(t, b), "", "  "); err != nil {
		t.Fatal(err)
	}
	return append(out.Bytes(), '\n')
}

func compact(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// compareSets lists the breaking differences from old to cur and the
// additions.
func compareSets(old, cur *descriptorpb.FileDescriptorSet) (breaks, adds []string) {
	files := map[string]*descriptorpb.FileDescriptorProto{}
	for _, f := range cur.File {
		files[f.GetName()] = f
	}
	seen := map[string]bool{}
	for _, of := range old.File {
		seen[of.GetName()] = true
		cf, ok := files[of.GetName()]
		if !ok {
			breaks = append(breaks, fmt.Sprintf("file %s is gone", of.GetName()))
			continue
		}
		c := &comparison{file: of.GetName()}
		c.file0(of, cf)
		breaks, adds = append(breaks, c.breaks...), append(adds, c.adds...)
	}
	for _, f := range cur.File {
		if !seen[f.GetName()] {
			adds = append(adds, "file "+f.GetName())
		}
	}
	return breaks, adds
}

type comparison struct {
	file         string
	breaks, adds []string
}

func (c *comparison) brk(format string, args ...any) {
	c.breaks = append(c.breaks, c.file+": "+fmt.Sprintf(format, args...))
}

func (c *comparison) add(format string, args ...any) {
	c.adds = append(c.adds, c.file+": "+fmt.Sprintf(format, args...))
}

func (c *comparison) file0(o, n *descriptorpb.FileDescriptorProto) {
	if o.GetPackage() != n.GetPackage() {
		c.brk("package %s is now %s", o.GetPackage(), n.GetPackage())
	}
	c.messages(o.GetPackage(), o.GetMessageType(), n.GetMessageType())
	c.enums(o.GetPackage(), o.GetEnumType(), n.GetEnumType())
	services := byName(n.GetService(), (*descriptorpb.ServiceDescriptorProto).GetName)
	for _, osvc := range o.GetService() {
		ns, ok := services[osvc.GetName()]
		if !ok {
			c.brk("service %s is gone", osvc.GetName())
			continue
		}
		methods := byName(ns.GetMethod(), (*descriptorpb.MethodDescriptorProto).GetName)
		for _, om := range osvc.GetMethod() {
			name := osvc.GetName() + "." + om.GetName()
			nm, ok := methods[om.GetName()]
			switch {
			case !ok:
				c.brk("rpc %s is gone", name)
			case om.GetInputType() != nm.GetInputType() || om.GetOutputType() != nm.GetOutputType():
				c.brk("rpc %s takes %s and returns %s, recorded %s and %s", name, nm.GetInputType(), nm.GetOutputType(), om.GetInputType(), om.GetOutputType())
			case om.GetClientStreaming() != nm.GetClientStreaming() || om.GetServerStreaming() != nm.GetServerStreaming():
				c.brk("rpc %s streams differently", name)
			}
		}
		for _, nm := range ns.GetMethod() {
			if !slices.ContainsFunc(osvc.GetMethod(), func(m *descriptorpb.MethodDescriptorProto) bool { return m.GetName() == nm.GetName() }) {
				c.add("rpc %s.%s", osvc.GetName(), nm.GetName())
			}
		}
	}
}

func (c *comparison) messages(scope string, old, cur []*descriptorpb.DescriptorProto) {
	msgs := byName(cur, (*descriptorpb.DescriptorProto).GetName)
	for _, om := range old {
		name := scope + "." + om.GetName()
		nm, ok := msgs[om.GetName()]
		if !ok {
			c.brk("message %s is gone", name)
			continue
		}
		c.fields(name, om, nm)
		c.messages(name, om.GetNestedType(), nm.GetNestedType())
		c.enums(name, om.GetEnumType(), nm.GetEnumType())
	}
	for _, nm := range cur {
		if !slices.ContainsFunc(old, func(m *descriptorpb.DescriptorProto) bool { return m.GetName() == nm.GetName() }) {
			c.add("message %s.%s", scope, nm.GetName())
		}
	}
}

// fields compares a message's fields by number: the wire identifies a
// field by its number, JSON and the generated code by its name.
func (c *comparison) fields(msg string, o, n *descriptorpb.DescriptorProto) {
	fields := map[int32]*descriptorpb.FieldDescriptorProto{}
	for _, f := range n.GetField() {
		fields[f.GetNumber()] = f
	}
	oneof := func(m *descriptorpb.DescriptorProto, f *descriptorpb.FieldDescriptorProto) string {
		if f.OneofIndex == nil || f.GetProto3Optional() {
			return ""
		}
		return m.GetOneofDecl()[f.GetOneofIndex()].GetName()
	}
	for _, of := range o.GetField() {
		nf, ok := fields[of.GetNumber()]
		switch {
		case !ok:
			c.brk("field %d (%s) of %s is gone", of.GetNumber(), of.GetName(), msg)
		case nf.GetName() != of.GetName() || nf.GetJsonName() != of.GetJsonName():
			c.brk("field %d of %s is named %s, recorded %s", of.GetNumber(), msg, nf.GetName(), of.GetName())
		case nf.GetType() != of.GetType() || nf.GetTypeName() != of.GetTypeName() || nf.GetLabel() != of.GetLabel() || nf.GetProto3Optional() != of.GetProto3Optional():
			c.brk("field %d (%s) of %s is %s %s%s, recorded %s %s%s", of.GetNumber(), of.GetName(), msg,
				nf.GetLabel(), nf.GetType(), nf.GetTypeName(), of.GetLabel(), of.GetType(), of.GetTypeName())
		case oneof(n, nf) != oneof(o, of):
			c.brk("field %d (%s) of %s is in oneof %q, recorded %q", of.GetNumber(), of.GetName(), msg, oneof(n, nf), oneof(o, of))
		}
	}
	for _, nf := range n.GetField() {
		if !slices.ContainsFunc(o.GetField(), func(f *descriptorpb.FieldDescriptorProto) bool { return f.GetNumber() == nf.GetNumber() }) {
			c.add("field %d (%s) of %s", nf.GetNumber(), nf.GetName(), msg)
		}
	}
	for _, r := range o.GetReservedRange() {
		for _, nf := range n.GetField() {
			if nf.GetNumber() >= r.GetStart() && nf.GetNumber() < r.GetEnd() {
				c.brk("field %d (%s) of %s takes a reserved number", nf.GetNumber(), nf.GetName(), msg)
			}
		}
	}
}

func (c *comparison) enums(scope string, old, cur []*descriptorpb.EnumDescriptorProto) {
	enums := byName(cur, (*descriptorpb.EnumDescriptorProto).GetName)
	for _, oe := range old {
		name := scope + "." + oe.GetName()
		ne, ok := enums[oe.GetName()]
		if !ok {
			c.brk("enum %s is gone", name)
			continue
		}
		values := map[int32]string{}
		for _, v := range ne.GetValue() {
			values[v.GetNumber()] = v.GetName()
		}
		for _, ov := range oe.GetValue() {
			if nv, ok := values[ov.GetNumber()]; !ok || nv != ov.GetName() {
				c.brk("value %d of enum %s is %q, recorded %q", ov.GetNumber(), name, nv, ov.GetName())
			}
		}
	}
}

func byName[T any](items []T, name func(T) string) map[string]T {
	m := make(map[string]T, len(items))
	for _, it := range items {
		m[name(it)] = it
	}
	return m
}
