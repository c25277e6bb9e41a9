package shscript

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// Umask is the file mode creation mask of the small shells: what they
// clear from 0777 for a new folder and from 0666 for a new file, and
// from a symbolic mode without a who ("+x"), as POSIX chmod does.
const Umask = 0o022

// modeBits are the bits a mode operand may set.
const modeBits = fs.ModePerm | fs.ModeSticky | fs.ModeSetuid | fs.ModeSetgid

// ParseMode reads the mode operand of chmod and mkdir -m: octal digits
// (755, 1777) or POSIX symbolic clauses joined by "," (u+x, go-w, a=rX,
// +x), applied to old, the file's mode now. It returns the new
// permission, sticky, setuid and setgid bits, or an error naming a
// malformed operand.
func ParseMode(s string, old fs.FileMode) (fs.FileMode, error) {
	bad := fmt.Errorf("invalid mode '%s'", s)
	if s == "" {
		return 0, bad
	}
	if s[0] >= '0' && s[0] <= '9' {
		n, err := strconv.ParseUint(s, 8, 32)
		if err != nil || n > 0o7777 {
			return 0, bad
		}
		return FromUnix(uint32(n)), nil
	}
	m := old & modeBits
	for _, clause := range strings.Split(s, ",") {
		i := 0
		var who uint32
		for ; i < len(clause) && strings.IndexByte("ugoa", clause[i]) >= 0; i++ {
			who |= map[byte]uint32{'u': 0o4700, 'g': 0o2070, 'o': 0o1007, 'a': 0o7777}[clause[i]]
		}
		mask := who
		if who == 0 {
			mask = 0o7777 &^ Umask
		}
		if i == len(clause) {
			return 0, bad
		}
		for i < len(clause) {
			op := clause[i]
			if op != '+' && op != '-' && op != '=' {
				return 0, bad
			}
			i++
			var perm uint32 // as st_mode has them
			for ; i < len(clause) && strings.IndexByte("rwxXst", clause[i]) >= 0; i++ {
				switch clause[i] {
				case 'r':
					perm |= 0o444
				case 'w':
					perm |= 0o222
				case 'x':
					perm |= 0o111
				case 'X':
					if old.IsDir() || old&0o111 != 0 {
						perm |= 0o111
					}
				case 's':
					perm |= 0o6000
				case 't':
					perm |= 0o1000
				}
			}
			cur := UnixBits(m)
			switch op {
			case '+':
				cur |= perm & mask
			case '-':
				cur &^= perm & mask
			case '=':
				clear := who
				if who == 0 {
					clear = 0o7777
				}
				cur = cur&^clear | perm&mask
			}
			m = FromUnix(cur)
		}
	}
	return m, nil
}

// UnixBits is m's permission, setuid, setgid and sticky bits as
// st_mode has them (sticky 0o1000).
func UnixBits(m fs.FileMode) uint32 {
	u := uint32(m & fs.ModePerm)
	for fm, bit := range map[fs.FileMode]uint32{fs.ModeSetuid: 0o4000, fs.ModeSetgid: 0o2000, fs.ModeSticky: 0o1000} {
		if m&fm != 0 {
			u |= bit
		}
	}
	return u
}

// FromUnix is UnixBits' inverse: the fs.FileMode of st_mode's low 12
// bits.
func FromUnix(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	for bit, fm := range map[uint32]fs.FileMode{0o4000: fs.ModeSetuid, 0o2000: fs.ModeSetgid, 0o1000: fs.ModeSticky} {
		if u&bit != 0 {
			m |= fm
		}
	}
	return m
}

// MkdirArgs reads the arguments of mkdir: the flags -p and -m MODE
// (ParseMode's; 0777 less Umask without it) and the folders to make.
func MkdirArgs(args []string) (parents bool, mode fs.FileMode, names []string, err error) {
	mode = 0o777 &^ Umask
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		a := args[0]
		args = args[1:]
		if a == "--" {
			break
		}
		for i := 1; i < len(a); i++ {
			switch a[i] {
			case 'p':
				parents = true
			case 'm':
				m := a[i+1:]
				if m == "" {
					if len(args) == 0 {
						return false, 0, nil, errors.New("option requires an argument -- 'm'")
					}
					m, args = args[0], args[1:]
				}
				if mode, err = ParseMode(m, fs.ModeDir|0o777); err != nil {
					return false, 0, nil, err
				}
				i = len(a)
			default:
				return false, 0, nil, fmt.Errorf("invalid option -- '%c'", a[i])
			}
		}
	}
	return parents, mode, args, nil
}
