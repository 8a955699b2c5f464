package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// value adapts a pair of closures to pflag.Value, so every flag writes
// straight into a typed field and reports its own message on bad input.
type value struct {
	set  func(string) error
	get  func() string
	kind string
}

func (v *value) Set(s string) error { return v.set(s) }
func (v *value) String() string     { return v.get() }
func (v *value) Type() string       { return v.kind }

// maxCount bounds counts that have no tighter natural limit, so that every
// value still fits a C int when it is handed to a kernel or to MPI.
const maxCount = math.MaxInt32

// intFlag describes an integer flag: its names, its range and, for the
// problem-size flags, the environment variable that supplies a value when
// the flag is absent.
type intFlag struct {
	name, short, alias, env string
	def, lo, hi, multiple   int
	usage                   string
	// zeroUnset: 0 stands for the flag not given (its default), not for a
	// value; given, the flag takes lo+1 and up, and Args leaves it out at 0.
	zeroUnset bool
}

// parse converts raw text and checks it against the flag's range.
func (f intFlag) parse(raw string) (int, error) {
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(raw, "-") {
			return 0, fmt.Errorf("must be at most %d, got %s", f.hi, raw)
		}
		return 0, f.kindError(raw)
	}
	if n < int64(f.lo) {
		return 0, f.kindError(raw)
	}
	if n > int64(f.hi) {
		return 0, fmt.Errorf("must be at most %d, got %d", f.hi, n)
	}
	if f.multiple > 1 && n%int64(f.multiple) != 0 {
		return 0, fmt.Errorf("must be a multiple of %d, got %d", f.multiple, n)
	}
	return int(n), nil
}

// check applies the same rules to a value that is already an integer.
func (f intFlag) check(n int) error {
	_, err := f.parse(strconv.Itoa(n))
	return err
}

func (f intFlag) kindError(raw string) error {
	if f.lo > 0 {
		return fmt.Errorf("must be a positive integer, got %q", raw)
	}
	return fmt.Errorf("must be a non-negative integer, got %q", raw)
}

// helpText is the flag's usage line with its alias and variable appended.
func (f intFlag) helpText() string {
	var extra []string
	if f.alias != "" {
		extra = append(extra, "alias --"+f.alias)
	}
	if f.env != "" {
		extra = append(extra, "env "+f.env)
	}
	if len(extra) == 0 {
		return f.usage
	}
	return f.usage + " (" + strings.Join(extra, "; ") + ")"
}

func (f intFlag) bind(fs *pflag.FlagSet, p *int) {
	*p = f.def
	v := &value{
		kind: "int",
		get:  func() string { return strconv.Itoa(*p) },
		set: func(s string) error {
			n, err := f.parse(s)
			if err != nil {
				return err
			}
			*p = n
			return nil
		},
	}
	fs.VarP(v, f.name, f.short, f.helpText())
}

// bindList binds the flag to a comma-separated list of values, each parsed
// as the flag parses one; the first value is also stored in *p.
func (f intFlag) bindList(fs *pflag.FlagSet, p *int, list *[]int) {
	*p = f.def
	v := &value{
		kind: "list",
		get:  func() string { return strconv.Itoa(*p) },
		set: func(s string) error {
			var vals []int
			for _, raw := range strings.Split(s, ",") {
				n, err := f.parse(strings.TrimSpace(raw))
				if err != nil {
					return err
				}
				if slices.Contains(vals, n) {
					return fmt.Errorf("%d is listed twice", n)
				}
				vals = append(vals, n)
			}
			*list, *p = vals, vals[0]
			return nil
		},
	}
	fs.VarP(v, f.name, f.short, f.helpText())
}

func parseSeed(raw string) (uint32, error) {
	digits, base := raw, 10
	if len(raw) > 2 && (raw[:2] == "0x" || raw[:2] == "0X") {
		digits, base = raw[2:], 16
	}
	n, err := strconv.ParseUint(digits, base, 32)
	if err != nil {
		return 0, fmt.Errorf("must be an unsigned 32-bit integer, got %q", raw)
	}
	return uint32(n), nil
}

func bindSeed(fs *pflag.FlagSet, p *uint32, usage string) {
	v := &value{
		kind: "uint32",
		get:  func() string { return strconv.FormatUint(uint64(*p), 10) },
		set: func(s string) error {
			n, err := parseSeed(s)
			if err != nil {
				return err
			}
			*p = n
			return nil
		},
	}
	fs.VarP(v, "seed", "", usage)
}

func parseBool(raw string) (bool, error) {
	b, err := strconv.ParseBool(raw)
	if err != nil {
		return false, fmt.Errorf("must be true or false, got %q", raw)
	}
	return b, nil
}

// bindBool defines a switch. When invert is set the flag names the
// negation of the field (--no-kernel-timing clears KernelTiming).
func bindBool(fs *pflag.FlagSet, p *bool, name, short string, invert bool, usage string) {
	v := &value{
		kind: "bool",
		get:  func() string { return strconv.FormatBool(*p != invert) },
		set: func(s string) error {
			b, err := parseBool(s)
			if err != nil {
				return err
			}
			*p = b != invert
			return nil
		},
	}
	// NoOptDefVal is set by hand rather than through IsBoolFlag so that the
	// help text shows "--validate" instead of "--validate[=true|false]".
	fs.VarPF(v, name, short, usage).NoOptDefVal = "true"
}

// bindChoice defines a flag whose value is one of a fixed set of words.
func bindChoice(fs *pflag.FlagSet, name, short, usage string, get func() string, set func(string) error) {
	fs.VarP(&value{kind: "string", get: get, set: set}, name, short, usage)
}

// bindPath defines a flag naming a file or directory; it must not be empty.
func bindPath(fs *pflag.FlagSet, p *string, name, what, usage string) {
	v := &value{
		kind: "string",
		get:  func() string { return *p },
		set: func(s string) error {
			if s == "" {
				return fmt.Errorf("must name a %s", what)
			}
			*p = s
			return nil
		},
	}
	fs.VarP(v, name, "", usage)
}

// aliases maps the alternative long spellings to the canonical flag names.
var aliases = map[string]string{
	"tokens":  "num-tokens",
	"top-k":   "num-topk",
	"experts": "num-experts",
	"warmup":  "num-warmup",
	"iters":   "num-iters",
}

func normalizeAlias(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	if canonical, ok := aliases[name]; ok {
		return pflag.NormalizedName(canonical)
	}
	return pflag.NormalizedName(name)
}

// newFlagSet returns a quiet flag set: pflag prints nothing, and every
// problem comes back as an error that Parse turns into one message.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.SetNormalizeFunc(normalizeAlias)
	return fs
}
