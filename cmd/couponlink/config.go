package main

import (
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/couponlink/couponlink/internal/mysqlconn"
)

// flags is a command's flag set whose settings also come from the
// environment: a flag's default is its variable's value when that is set.
type flags struct {
	*flag.FlagSet
	badEnv []string
}

func newFlags(name, summary string, stderr io.Writer) *flags {
	fs := flag.NewFlagSet("couponlink "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: couponlink %s [flags]\n\n%s\n\nEvery flag can also be set by the environment variable named in brackets.\n\n", name, summary)
		fs.PrintDefaults()
	}
	return &flags{FlagSet: fs}
}

func (f *flags) string(name, env, def, usage string) *string {
	if env == "" {
		return f.String(name, def, usage)
	}
	if v, ok := os.LookupEnv(env); ok {
		def = v
	}
	return f.String(name, def, usage+" ["+env+"]")
}

// secret is a string flag whose environment value is never printed by -h.
func (f *flags) secret(name, env, usage string) func() string {
	v := f.String(name, "", usage+" ["+env+"; its value is not shown here]")
	return func() string {
		if *v != "" {
			return *v
		}
		return os.Getenv(env)
	}
}

func (f *flags) duration(name, env string, def time.Duration, usage string) *time.Duration {
	if v, ok := os.LookupEnv(env); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.badEnv = append(f.badEnv, fmt.Sprintf("%s=%q is not a duration (e.g. 30s, 5m)", env, v))
		} else {
			def = d
		}
	}
	return f.Duration(name, def, usage+" ["+env+"]")
}

func (f *flags) int(name, env string, def int, usage string) *int {
	if env == "" {
		return f.Int(name, def, usage)
	}
	if v, ok := os.LookupEnv(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.badEnv = append(f.badEnv, fmt.Sprintf("%s=%q is not an integer", env, v))
		} else {
			def = n
		}
	}
	return f.Int(name, def, usage+" ["+env+"]")
}

func (f *flags) float(name, env string, def float64, usage string) *float64 {
	if v, ok := os.LookupEnv(env); ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			f.badEnv = append(f.badEnv, fmt.Sprintf("%s=%q is not a number", env, v))
		} else {
			def = n
		}
	}
	return f.Float64(name, def, usage+" ["+env+"]")
}

func (f *flags) bool(name, env string, def bool, usage string) *bool {
	if env == "" {
		return f.Bool(name, def, usage)
	}
	if v, ok := os.LookupEnv(env); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.badEnv = append(f.badEnv, fmt.Sprintf("%s=%q is not true or false", env, v))
		} else {
			def = b
		}
	}
	return f.Bool(name, def, usage+" ["+env+"]")
}

// parse parses args; a bad flag or environment value is a usage error.
func (f *flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return errUsage
	}
	if len(f.badEnv) > 0 {
		fmt.Fprintln(f.Output(), "bad environment: "+strings.Join(f.badEnv, "; "))
		return errUsage
	}
	if f.NArg() > 0 {
		fmt.Fprintf(f.Output(), "unexpected arguments: %s\n", strings.Join(f.Args(), " "))
		return errUsage
	}
	return nil
}

const defaultDSN = "root@tcp(127.0.0.1:3307)/couponlink"

// dsn is the -dsn flag; -h shows its default (the environment's DSN)
// with the password hidden.
func (f *flags) dsn() *string {
	v := f.string("dsn", "COUPONLINK_MYSQL_DSN", defaultDSN, "MySQL DSN of couponlink's database, go-sql-driver form")
	fl := f.Lookup("dsn")
	fl.DefValue = mysqlconn.Redact(fl.DefValue)
	return v
}

// logLevel is the -log-level flag; a level slog does not know is a usage
// error, in the flag or in the environment, never silently info.
func (f *flags) logLevel() *slog.Level {
	l := new(slog.Level)
	if v, ok := os.LookupEnv("COUPONLINK_LOG_LEVEL"); ok {
		if err := l.UnmarshalText([]byte(v)); err != nil {
			f.badEnv = append(f.badEnv, fmt.Sprintf("COUPONLINK_LOG_LEVEL=%q is not a log level (debug, info, warn, error)", v))
		}
	}
	f.Var(levelFlag{l}, "log-level", "`level` of the logs: debug, info, warn or error [COUPONLINK_LOG_LEVEL]")
	return l
}

// levelFlag is a slog.Level as a flag.Value.
type levelFlag struct{ l *slog.Level }

func (v levelFlag) String() string {
	if v.l == nil { // the flag package's zero value, for -h
		return ""
	}
	return strings.ToLower(v.l.String())
}

func (v levelFlag) Set(s string) error {
	if err := v.l.UnmarshalText([]byte(s)); err != nil {
		return errors.New("not a log level (debug, info, warn, error)")
	}
	return nil
}

func newLogger(stderr io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// openMySQL opens a pool with the settings couponlink relies on
// (mysqlconn.Config); errors never show the DSN's password.
func openMySQL(dsn string, maxConns int) (*sql.DB, error) {
	return mysqlconn.Open(dsn, maxConns)
}
