// Package util is the "util" plugin that ships inside the kiln binary:
// exact arithmetic (calc) and the current time (now), as core tools that
// kiln serves in-process (toolset.Of) through the "builtin" runtime, like
// its other built-in plugins: no process boundary, no timeout_ms
// deadline. calc bounds its own input (maxExpression, maxExponent,
// maxBits).
package util

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones on machines without a zoneinfo database

	"github.com/kilnhq/kiln/core"
)

// Limits of calc.
const (
	maxExpression = 1000 // bytes
	maxExponent   = 400  // exponent of a literal: of 10, or of 2 in a hexadecimal one (0x1p-4)
	maxBits       = 4096 // size of an integer result
)

// Tools returns the plugin's tools, calc and now. A tool's failure (bad
// arguments, an expression it cannot evaluate, an unknown time zone) is
// its result, with IsError.
func Tools() []core.Tool {
	return []core.Tool{
		tool{spec: core.ToolSpec{
			Name:        "calc",
			Description: "Evaluate an arithmetic expression exactly: numbers, + - * / % and parentheses, e.g. (1.5 + 2) * 4 / 3. Division is exact; % needs integers.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string","description":"e.g. (1.5 + 2) * 4 / 3"}},"required":["expression"],"additionalProperties":false}`),
			Idempotent:  true,
		}, run: calcTool},
		tool{spec: core.ToolSpec{
			Name:        "now",
			Description: "The current date and time, in UTC or in an IANA time zone such as Europe/Oslo.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string","description":"IANA time zone, default UTC"}},"additionalProperties":false}`),
			Idempotent:  true,
		}, run: nowTool},
	}
}

// tool is one of the plugin's tools: its spec, and run, whose error is
// the tool's own failure.
type tool struct {
	spec core.ToolSpec
	run  func(args json.RawMessage) (string, error)
}

// Spec returns a copy of the spec.
func (t tool) Spec() core.ToolSpec {
	s := t.spec
	s.Schema = slices.Clone(s.Schema)
	return s
}

// Call runs the tool.
func (t tool) Call(_ context.Context, args json.RawMessage) (core.ToolResult, error) {
	return core.ResultOf(t.run(args)), nil
}

func calcTool(args json.RawMessage) (string, error) {
	var in struct {
		Expression string `json:"expression"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("arguments: %v", err)
	}
	return Calc(in.Expression)
}

// Calc evaluates an arithmetic expression exactly and formats the result:
// an integer as is, any other number as a decimal (with the exact fraction
// when the decimal is rounded).
func Calc(expr string) (string, error) {
	if strings.TrimSpace(expr) == "" {
		return "", errors.New("expression is empty")
	}
	if len(expr) > maxExpression {
		return "", fmt.Errorf("expression is longer than %d bytes", maxExpression)
	}
	node, err := parser.ParseExpr(expr)
	if err != nil {
		return "", fmt.Errorf("not an arithmetic expression: %v", err)
	}
	v, err := eval(node)
	if err != nil {
		return "", err
	}
	return format(v), nil
}

func eval(n ast.Expr) (constant.Value, error) {
	switch n := n.(type) {
	case *ast.BasicLit:
		if n.Kind != token.INT && n.Kind != token.FLOAT {
			return nil, fmt.Errorf("%s is not a number", n.Value)
		}
		expMark := "eE" // in a hexadecimal literal e is a digit, and p starts the exponent
		if strings.HasPrefix(n.Value, "0x") || strings.HasPrefix(n.Value, "0X") {
			expMark = "pP"
		}
		if exp := strings.IndexAny(n.Value, expMark); exp >= 0 {
			if e, err := strconv.Atoi(strings.TrimPrefix(n.Value[exp+1:], "+")); err != nil || e > maxExponent || e < -maxExponent {
				return nil, fmt.Errorf("%s: exponent out of range (at most %d)", n.Value, maxExponent)
			}
		}
		v := constant.MakeFromLiteral(n.Value, n.Kind, 0)
		if v.Kind() == constant.Unknown {
			return nil, fmt.Errorf("%s is not a number", n.Value)
		}
		return v, nil
	case *ast.ParenExpr:
		return eval(n.X)
	case *ast.UnaryExpr:
		if n.Op != token.ADD && n.Op != token.SUB {
			return nil, fmt.Errorf("operator %s is not supported (use + - * / %%)", n.Op)
		}
		x, err := eval(n.X)
		if err != nil {
			return nil, err
		}
		return constant.UnaryOp(n.Op, x, 0), nil
	case *ast.BinaryExpr:
		x, err := eval(n.X)
		if err != nil {
			return nil, err
		}
		y, err := eval(n.Y)
		if err != nil {
			return nil, err
		}
		return binary(n.Op, x, y)
	}
	return nil, fmt.Errorf("only numbers, + - * / %% and parentheses are allowed")
}

func binary(op token.Token, x, y constant.Value) (constant.Value, error) {
	switch op {
	case token.ADD, token.SUB, token.MUL:
	case token.QUO:
		if constant.Sign(y) == 0 {
			return nil, errors.New("division by zero")
		}
	case token.REM:
		if x.Kind() != constant.Int || y.Kind() != constant.Int {
			return nil, errors.New("% needs integers")
		}
		if constant.Sign(y) == 0 {
			return nil, errors.New("division by zero")
		}
	default:
		return nil, fmt.Errorf("operator %s is not supported (use + - * / %%)", op)
	}
	v := constant.BinaryOp(x, op, y)
	if v.Kind() == constant.Int {
		if constant.BitLen(v) > maxBits {
			return nil, errors.New("result is too large")
		}
		return v, nil
	}
	// A fraction is kept exact while it is small; past that go/constant
	// rounds it, and then a number outside float64's range is refused.
	if num := constant.Num(v); num.Kind() != constant.Unknown {
		if constant.BitLen(num) > maxBits || constant.BitLen(constant.Denom(v)) > maxBits {
			return nil, errors.New("result is too large or too precise")
		}
		return v, nil
	}
	if f, _ := constant.Float64Val(v); math.IsInf(f, 0) || f == 0 && constant.Sign(v) != 0 {
		return nil, errors.New("result is too large or too small")
	}
	return v, nil
}

// format writes an integer in full and any other number as a decimal of
// up to 15 significant digits, adding the exact fraction when that
// decimal is rounded.
func format(v constant.Value) string {
	if v.Kind() == constant.Int {
		return v.ExactString()
	}
	f, _ := constant.Float64Val(v)
	dec := strconv.FormatFloat(f, 'g', 15, 64)
	num, den := constant.Num(v), constant.Denom(v)
	if num.Kind() == constant.Unknown { // already rounded by go/constant
		return dec
	}
	if constant.Compare(den, token.EQL, constant.MakeInt64(1)) {
		return num.ExactString()
	}
	back := constant.MakeFromLiteral(dec, token.FLOAT, 0)
	if back.Kind() != constant.Unknown && constant.Compare(back, token.EQL, v) {
		return dec
	}
	return dec + " (exactly " + num.ExactString() + "/" + den.ExactString() + ")"
}

func nowTool(args json.RawMessage) (string, error) {
	var in struct {
		Timezone string `json:"timezone"`
	}
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			return "", fmt.Errorf("arguments: %v", err)
		}
	}
	loc := time.UTC
	if in.Timezone != "" {
		var err error
		if loc, err = time.LoadLocation(in.Timezone); err != nil {
			return "", fmt.Errorf("unknown time zone %q (use an IANA name such as Europe/Oslo)", in.Timezone)
		}
	}
	t := time.Now().In(loc)
	return fmt.Sprintf("%s (%s, %s)", t.Format(time.RFC3339), t.Weekday(), loc), nil
}

// Interface guard.
var _ core.Tool = tool{}
