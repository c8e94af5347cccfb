// Package cli parses the command lines of sandboxflow's commands strictly: a word that is neither
// a flag nor an expected argument, a NAME=VALUE flag given twice for one name, and a flag given
// an empty value are usage errors (exit code 2), never silently dropped or overwritten.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// ExitUsage is the exit code of a usage error.
const ExitUsage = 2

// UsageError reports a command line that does not parse. Commands exit with ExitUsage.
type UsageError struct {
	Msg string
}

func (e *UsageError) Error() string { return "usage: " + e.Msg }

func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// NewFlagSet returns a flag set that returns its errors instead of exiting and prints its
// messages to out.
func NewFlagSet(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return fs
}

// Parse parses args with fs, accepting flags before, between and after the positional
// arguments ("--" ends the flags), and returns the positional arguments. It returns a
// *UsageError when there are fewer than min or more than max positional arguments, when a flag
// that is not a Pairs flag is given twice, or when a flag not listed in mayBeEmpty is given an
// empty value. flag.ErrHelp is returned as it is.
func Parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int, mayBeEmpty ...string) ([]string, error) {
	onlyOnce(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &UsageError{Msg: err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		// fs.Parse stops at the first word that is not a flag, or after "--".
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if err := refuseEmpty(fs, mayBeEmpty); err != nil {
		return nil, err
	}
	switch {
	case len(pos) > maxArgs && maxArgs == 0:
		return nil, usagef("unexpected argument %q (%s takes flags only)", pos[0], fs.Name())
	case len(pos) > maxArgs:
		return nil, usagef("unexpected argument %q after %s", pos[maxArgs], strings.Join(pos[:maxArgs], " "))
	case len(pos) < minArgs:
		return nil, usagef("%s needs %d argument(s), got %d", fs.Name(), minArgs, len(pos))
	}
	return pos, nil
}

// refuseEmpty returns a UsageError for the first flag given on the command line with an empty
// value, unless its name is in mayBeEmpty. Boolean flags are never empty.
func refuseEmpty(fs *flag.FlagSet, mayBeEmpty []string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		for _, n := range mayBeEmpty {
			if n == f.Name {
				return
			}
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			return
		}
		if f.Value.String() == "" {
			err = usagef("flag --%s was given an empty value", f.Name)
		}
	})
	return err
}

// Pairs is a repeatable NAME=VALUE flag. A value without "=", an empty name, and a name given
// twice are refused when the flag is set. Values may be empty unless NonEmptyValues is set.
type Pairs struct {
	// Flag names the flag in messages, such as "--env".
	Flag string
	// NonEmptyValues refuses "NAME=".
	NonEmptyValues bool
	// Map holds the pairs set so far. Optional: made by the first Set.
	Map map[string]string
}

// String returns the pairs as NAME=VALUE, sorted by name and comma-separated.
func (p *Pairs) String() string {
	if p == nil {
		return ""
	}
	keys := make([]string, 0, len(p.Map))
	for k := range p.Map {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + p.Map[k]
	}
	return strings.Join(keys, ",")
}

// Set adds one NAME=VALUE pair.
func (p *Pairs) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	switch {
	case !ok:
		return fmt.Errorf("%q: want NAME=VALUE", v)
	case name == "":
		return fmt.Errorf("%q: the name is empty", v)
	case value == "" && p.NonEmptyValues:
		return fmt.Errorf("%q: the value is empty", v)
	}
	if _, dup := p.Map[name]; dup {
		return fmt.Errorf("%s is given twice", name)
	}
	if p.Map == nil {
		p.Map = map[string]string{}
	}
	p.Map[name] = value
	return nil
}

// List splits a comma-separated list, refusing an empty element ("python,", "a,,b") and an
// element given twice. An empty string is an empty list.
func List(flagName, s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	seen := map[string]bool{}
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, usagef("--%s %q has an empty element", flagName, s)
		}
		if seen[p] {
			return nil, usagef("--%s %q lists %s twice", flagName, s, p)
		}
		seen[p] = true
		parts[i] = p
	}
	return parts, nil
}

// onlyOnce makes every flag of fs but the Pairs flags refuse a second value on the command line.
func onlyOnce(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		switch f.Value.(type) {
		case *Pairs, *Strings, *onceValue:
			return
		}
		f.Value = &onceValue{Value: f.Value}
	})
}

// onceValue is a flag value that may be set once.
type onceValue struct {
	flag.Value
	set bool
}

// String returns the wrapped value's text; the flag package also calls it on a zero onceValue
// (to tell a default from the zero value when it prints usage), which has none.
func (o *onceValue) String() string {
	if o == nil || o.Value == nil {
		return ""
	}
	return o.Value.String()
}

func (o *onceValue) Set(v string) error {
	if o.set {
		return errors.New("given twice")
	}
	o.set = true
	return o.Value.Set(v)
}

// IsBoolFlag keeps "--wait" (without a value) working for boolean flags.
func (o *onceValue) IsBoolFlag() bool {
	b, ok := o.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Get returns the value, for flag.Getter.
func (o *onceValue) Get() any {
	if g, ok := o.Value.(flag.Getter); ok {
		return g.Get()
	}
	return o.Value.String()
}

// Strings is a repeatable flag: each use adds one value. An empty value, or one given twice, is
// refused.
type Strings []string

func (s *Strings) String() string { return strings.Join(*s, ",") }

// Set adds v.
func (s *Strings) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("empty value")
	}
	for _, have := range *s {
		if have == v {
			return fmt.Errorf("%s is given twice", v)
		}
	}
	*s = append(*s, v)
	return nil
}
