// Package settings defines the command-line flags of couponlink's
// programs: Flags, a flag set whose defaults come from COUPONLINK_*
// environment variables, and the groups of flags several commands share
// (Database: -dsn; Redis: -redis, -redis-cluster, -redis-mode,
// -key-prefix; Mapping: -mapping, -source; Checkpoint: -name; Metrics:
// -metrics-addr; Logging: -log-level; Snapshot: -snapshot-position). Each
// group is a struct whose Register method adds its flags to a Flags; a
// command builds its flag set from the groups it needs and its own flags.
//
// A Flags records the environment variable of each of its flags (Env), so
// that the flags of every command can be listed, with their variables,
// without running the command.
package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/couponlink/couponlink/internal/redact"
)

// ErrUsage is what Parse returns after it printed a usage error (a bad
// flag, a bad environment value, an unexpected argument).
var ErrUsage = errors.New("usage")

// Flags is a program's (or a command's) flag set whose settings also come
// from the environment: a flag registered with a variable (the Env...
// methods, the groups) takes the variable's value as its default when it
// is set, and its help names the variable in brackets. Flags registered
// with the methods of flag.FlagSet have no variable: only the command line
// sets them (one-shot actions such as -once or -json).
type Flags struct {
	*flag.FlagSet
	summary string
	env     map[string]string // flag name -> its variable
	secret  map[string]bool   // flags whose variable's value -h never shows
	files   map[string]string // flag name -> the variable of a file holding its value
	badEnv  []string
	checks  []func() error // AfterParse's
}

// New is the flag set of the program named name (e.g. "couponlink cdc"),
// whose usage, printed on stderr by -h and by a usage error, is the
// summary and the flags.
func New(name, summary string, stderr io.Writer) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := Wrap(fs)
	f.summary = summary
	fs.Usage = f.usage
	return f
}

// Wrap adds environment-backed flags to fs (e.g. flag.CommandLine),
// keeping its usage function.
func Wrap(fs *flag.FlagSet) *Flags {
	return &Flags{FlagSet: fs, env: map[string]string{}, secret: map[string]bool{}, files: map[string]string{}}
}

// Group is flags several commands share (Database, Redis, ...): its
// Register adds them to a Flags.
type Group interface{ Register(f *Flags) }

// Add registers the groups' flags on f.
func (f *Flags) Add(groups ...Group) {
	for _, g := range groups {
		g.Register(f)
	}
}

// Summary is what the program does, as its usage says.
func (f *Flags) Summary() string { return f.summary }

// Env is the environment variable of the flag name ("": none, only the
// command line sets it).
func (f *Flags) Env(name string) string { return f.env[name] }

// IsSecret says whether the flag name's variable holds a secret, whose
// value -h never shows.
func (f *Flags) IsSecret(name string) bool { return f.secret[name] }

func (f *Flags) usage() {
	w := f.Output()
	fmt.Fprintf(w, "usage: %s [flags]\n\n%s\n\n", f.Name(), f.summary)
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	switch {
	case n > 0 && len(f.env) == n:
		fmt.Fprint(w, "Every flag can also be set by the environment variable named in brackets.\n\n")
	case len(f.env) > 0:
		fmt.Fprint(w, "A flag with an environment variable named in brackets can also be set by it; the others only on the command line.\n\n")
	}
	f.PrintDefaults()
}

// bind records that env sets the flag name, and returns usage naming it.
func (f *Flags) bind(name, env, usage string) string {
	if env == "" {
		panic("settings: flag -" + name + " registered without its environment variable")
	}
	f.env[name] = env
	return usage + " [" + env + "]"
}

// fromEnv calls set with env's value when env is set; an error of set is
// a bad environment value, reported by Parse as "ENV="value" is " + err.
func (f *Flags) fromEnv(env string, set func(string) error) {
	if v, ok := os.LookupEnv(env); ok {
		if err := set(v); err != nil {
			f.badEnv = append(f.badEnv, fmt.Sprintf("%s=%q is %v", env, v, err))
		}
	}
}

// EnvString is a string flag set by env too.
func (f *Flags) EnvString(name, env, def, usage string) *string {
	f.fromEnv(env, func(v string) error { def = v; return nil })
	return f.String(name, def, f.bind(name, env, usage))
}

// EnvSecret is a string flag set by env too, whose environment value is
// never printed by -h: it is read when the flag is empty, at each call.
// env_FILE may name a file holding the value instead (FileEnv).
func (f *Flags) EnvSecret(name, env, usage string) func() string {
	f.env[name], f.secret[name], f.files[name] = env, true, env+"_FILE"
	v := f.String(name, "", usage+" ["+env+"; its value is not shown here]")
	return func() string {
		if *v != "" {
			return *v
		}
		return os.Getenv(env)
	}
}

// EnvRedacted is a string flag set by env too whose value may hold a
// password (a DSN, a URL): -h shows its default through redact.String.
// env_FILE may name a file holding the value instead (FileEnv).
func (f *Flags) EnvRedacted(name, env, def, usage string) *string {
	v := f.EnvString(name, env, def, usage)
	f.files[name] = env + "_FILE"
	fl := f.Lookup(name)
	fl.DefValue = redact.String(fl.DefValue)
	return v
}

// EnvDuration is a duration flag set by env too.
func (f *Flags) EnvDuration(name, env string, def time.Duration, usage string) *time.Duration {
	f.fromEnv(env, setTo(&def, time.ParseDuration, "not a duration (e.g. 30s, 5m)"))
	return f.Duration(name, def, f.bind(name, env, usage))
}

// EnvInt is an integer flag set by env too.
func (f *Flags) EnvInt(name, env string, def int, usage string) *int {
	f.fromEnv(env, setTo(&def, strconv.Atoi, "not an integer"))
	return f.Int(name, def, f.bind(name, env, usage))
}

// EnvFloat is a number flag set by env too.
func (f *Flags) EnvFloat(name, env string, def float64, usage string) *float64 {
	parse := func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }
	f.fromEnv(env, setTo(&def, parse, "not a number"))
	return f.Float64(name, def, f.bind(name, env, usage))
}

// EnvBool is a boolean flag set by env too.
func (f *Flags) EnvBool(name, env string, def bool, usage string) *bool {
	f.fromEnv(env, setTo(&def, strconv.ParseBool, "not true or false"))
	return f.Bool(name, def, f.bind(name, env, usage))
}

// setTo is a setter of fromEnv: the value parse reads becomes *def; what
// parse refuses is the error not ("not a number").
func setTo[T any](def *T, parse func(string) (T, error), not string) func(string) error {
	return func(v string) error {
		x, err := parse(v)
		if err != nil {
			return errors.New(not)
		}
		*def = x
		return nil
	}
}

// EnvVar is a flag of any type set by env too: env's value goes through
// v.Set before the command line's. Set's error completes "ENV="value" is "
// and "invalid value for flag -name: ": say "not a ...".
func (f *Flags) EnvVar(v flag.Value, name, env, usage string) {
	f.fromEnv(env, v.Set)
	f.Var(v, name, f.bind(name, env, usage))
}

// AfterParse adds a check that Parse runs once the flags are read (a
// group's settings that go together, such as TLS files and their mode);
// its error is a usage error.
func (f *Flags) AfterParse(check func() error) { f.checks = append(f.checks, check) }

// Parse parses args; a bad flag, a bad environment value or an argument
// that is not a flag is a usage error (ErrUsage, the reason printed), and
// -h is flag.ErrHelp, the usage printed.
func (f *Flags) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return ErrUsage
	}
	if len(f.badEnv) > 0 {
		fmt.Fprintln(f.Output(), "bad environment: "+strings.Join(f.badEnv, "; "))
		return ErrUsage
	}
	if err := f.readFiles(); err != nil {
		fmt.Fprintln(f.Output(), "bad environment: "+err.Error())
		return ErrUsage
	}
	if f.NArg() > 0 {
		fmt.Fprintf(f.Output(), "unexpected arguments: %s\n", strings.Join(f.Args(), " "))
		return ErrUsage
	}
	for _, check := range f.checks {
		if err := check(); err != nil {
			fmt.Fprintln(f.Output(), err)
			return ErrUsage
		}
	}
	return nil
}
