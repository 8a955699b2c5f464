package sidebyside

import (
	"strings"
)

// Command is one process "compare --run" starts: no shell is involved,
// Argv[0] is looked up in PATH when it has no slash, and Env is set on top
// of epbench's own environment.
type Command struct {
	Env  []string // "NAME=value", in the order they were first set
	Argv []string
}

// String renders the command for a POSIX shell, quoted so that pasting it
// runs exactly Argv with Env: "env NAME=value ... argv...".
func (c Command) String() string {
	words := make([]string, 0, len(c.Env)+len(c.Argv)+1)
	if len(c.Env) > 0 {
		words = append(words, "env")
		for _, kv := range c.Env {
			name, value, _ := strings.Cut(kv, "=")
			words = append(words, name+"="+shellQuote(value))
		}
	}
	for _, a := range c.Argv {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// environ is epbench's environment with Env applied, later entries
// replacing earlier ones of the same name.
func (c Command) environ(base []string) []string {
	set := make(map[string]bool, len(c.Env))
	for _, kv := range c.Env {
		name, _, _ := strings.Cut(kv, "=")
		set[name] = true
	}
	out := make([]string, 0, len(base)+len(c.Env))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if !set[name] {
			out = append(out, kv)
		}
	}
	return append(out, c.Env...)
}

// shellQuote leaves words of plain characters alone and wraps anything else
// in single quotes, each embedded quote written as '"'"'.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	plain := true
	for _, r := range s {
		if !isPlain(r) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// isPlain reports whether a shell reads r literally anywhere in a word.
func isPlain(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("@%+=:,./_-", r)
}

// environment is what a launch sets on top of epbench's environment, in
// the order names were first set, so a command prints the same way each time.
type environment struct {
	lookup func(string) (string, bool)
	names  []string
	values map[string]string
}

func newEnvironment(lookup func(string) (string, bool)) *environment {
	return &environment{lookup: lookup, values: map[string]string{}}
}

// get returns the value a process started with this environment sees.
func (e *environment) get(name string) (string, bool) {
	if v, ok := e.values[name]; ok {
		return v, true
	}
	return e.lookup(name)
}

func (e *environment) set(name, value string) {
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

// prepend puts dirs in front of the search path name, keeping what it held.
func (e *environment) prepend(name string, dirs ...string) {
	if len(dirs) == 0 {
		return
	}
	v := strings.Join(dirs, ":")
	if old, ok := e.get(name); ok && old != "" {
		v += ":" + old
	}
	e.set(name, v)
}

// assignments lists the variables set, as "NAME=value".
func (e *environment) assignments() []string {
	out := make([]string, len(e.names))
	for i, n := range e.names {
		out[i] = n + "=" + e.values[n]
	}
	return out
}
