package settings

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
)

// A flag registered with a variable takes the variable's value as its
// default, names it in its help and records it (Env); the command line
// wins over the environment.
func TestEnvIsTheDefault(t *testing.T) {
	t.Setenv("COUPONLINK_T_S", "from-env")
	t.Setenv("COUPONLINK_T_D", "2m")
	t.Setenv("COUPONLINK_T_I", "7")
	t.Setenv("COUPONLINK_T_F", "0.25")
	t.Setenv("COUPONLINK_T_B", "true")
	f := New("couponlink t", "", &bytes.Buffer{})
	s := f.EnvString("s", "COUPONLINK_T_S", "def", "a string")
	d := f.EnvDuration("d", "COUPONLINK_T_D", time.Second, "a duration")
	i := f.EnvInt("i", "COUPONLINK_T_I", 1, "an integer")
	x := f.EnvFloat("x", "COUPONLINK_T_F", 1, "a number")
	b := f.EnvBool("b", "COUPONLINK_T_B", false, "a boolean")
	once := f.Bool("once", false, "an action")
	require.NoError(t, f.Parse([]string{"-i", "9"}))
	assert.Equal(t, "from-env", *s)
	assert.Equal(t, 2*time.Minute, *d)
	assert.Equal(t, 9, *i, "the command line wins")
	assert.Equal(t, 0.25, *x)
	assert.True(t, *b)
	assert.False(t, *once)
	assert.Equal(t, "COUPONLINK_T_S", f.Env("s"))
	assert.Equal(t, "", f.Env("once"), "a flag of flag.FlagSet's has no variable")
	assert.Equal(t, "a string [COUPONLINK_T_S]", f.Lookup("s").Usage)
	assert.Equal(t, "an action", f.Lookup("once").Usage)
}

// A variable whose value is not of the flag's type is a usage error,
// naming the variable, the value and what it should be.
func TestBadEnvironment(t *testing.T) {
	for _, tc := range []struct{ env, value, want string }{
		{"COUPONLINK_T_D", "soon", `COUPONLINK_T_D="soon" is not a duration (e.g. 30s, 5m)`},
		{"COUPONLINK_T_I", "many", `COUPONLINK_T_I="many" is not an integer`},
		{"COUPONLINK_T_F", "5%", `COUPONLINK_T_F="5%" is not a number`},
		{"COUPONLINK_T_B", "yes please", `COUPONLINK_T_B="yes please" is not true or false`},
		{"COUPONLINK_LOG_LEVEL", "loud", `COUPONLINK_LOG_LEVEL="loud" is not a log level (debug, info, warn, error)`},
		{"COUPONLINK_SNAPSHOT_POSITION", "ftwrl", `COUPONLINK_SNAPSHOT_POSITION="ftwrl" is not a snapshot position method (auto, status, lock or tables)`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			var out bytes.Buffer
			f := New("couponlink t", "", &out)
			f.EnvDuration("d", "COUPONLINK_T_D", 0, "")
			f.EnvInt("i", "COUPONLINK_T_I", 0, "")
			f.EnvFloat("x", "COUPONLINK_T_F", 0, "")
			f.EnvBool("b", "COUPONLINK_T_B", false, "")
			f.Add(&Logging{}, &Snapshot{})
			assert.ErrorIs(t, f.Parse(nil), ErrUsage)
			assert.Equal(t, "bad environment: "+tc.want+"\n", out.String())
		})
	}
}

// An argument that is not a flag is a usage error; -h prints the usage.
func TestParse(t *testing.T) {
	var out bytes.Buffer
	f := New("couponlink t", "Does t.", &out)
	assert.ErrorIs(t, f.Parse([]string{"extra"}), ErrUsage)
	assert.Contains(t, out.String(), "unexpected arguments: extra")
	assert.ErrorIs(t, f.Parse([]string{"-nope"}), ErrUsage)
	out.Reset()
	assert.ErrorIs(t, f.Parse([]string{"-h"}), flag.ErrHelp)
	assert.Equal(t, "usage: couponlink t [flags]\n\nDoes t.\n\n", out.String(), "no flags: no word on variables")
}

// The usage says that every flag has a variable only when every flag has
// one.
func TestUsageNamesVariablesTruly(t *testing.T) {
	var out bytes.Buffer
	f := New("couponlink t", "Does t.", &out)
	f.Add(&Database{})
	f.Usage()
	assert.Contains(t, out.String(), "\n\nEvery flag can also be set by the environment variable named in brackets.\n\n")
	out.Reset()
	f.Bool("json", false, "print JSON")
	f.Usage()
	assert.Contains(t, out.String(), "\n\nA flag with an environment variable named in brackets can also be set by it; the others only on the command line.\n\n")
	assert.Contains(t, out.String(), "  -json\n    \tprint JSON\n")
}

// -h never shows a secret's value, nor the DSN's password; a secret is
// read from the environment when its flag is empty.
func TestSecrets(t *testing.T) {
	t.Setenv("COUPONLINK_MYSQL_DSN", "cl:Hush-123@tcp(db:3306)/couponlink")
	t.Setenv("COUPONLINK_T_SECRET", "Hush-456")
	var out bytes.Buffer
	f := New("couponlink t", "", &out)
	var db Database
	f.Add(&db)
	secret := f.EnvSecret("secret", "COUPONLINK_T_SECRET", "a key")
	f.Usage()
	assert.NotContains(t, out.String(), "Hush")
	assert.Contains(t, out.String(), "a key [COUPONLINK_T_SECRET; its value is not shown here]")
	assert.True(t, f.IsSecret("secret"))
	assert.Equal(t, "COUPONLINK_T_SECRET", f.Env("secret"))
	require.NoError(t, f.Parse(nil))
	assert.Equal(t, "cl:Hush-123@tcp(db:3306)/couponlink", *db.DSN)
	assert.Equal(t, "Hush-456", secret())
	require.NoError(t, f.Parse([]string{"-secret", "given"}))
	assert.Equal(t, "given", secret())
}

// The groups: their names, variables and defaults, and the values of
// -log-level and -snapshot-position.
func TestGroups(t *testing.T) {
	f := New("couponlink t", "", &bytes.Buffer{})
	var (
		db  Database
		r   = Redis{AddrUse: "redis use", ModeUse: "mode use"}
		m   = Mapping{FileUse: "file use", SourceUse: "source use"}
		cp  = Checkpoint{Use: "name use"}
		met = Metrics{Daemon: "reconcile", Use: "metrics use"}
		lg  Logging
		sn  Snapshot
	)
	want := map[string][2]string{ // flag: variable, default
		"dsn":               {"COUPONLINK_MYSQL_DSN", ""}, // no built-in database or Redis
		"redis":             {"COUPONLINK_REDIS_ADDR", ""},
		"redis-cluster":     {"COUPONLINK_REDIS_CLUSTER", "false"},
		"redis-username":    {"COUPONLINK_REDIS_USERNAME", ""},
		"redis-password":    {"COUPONLINK_REDIS_PASSWORD", ""},
		"redis-mode":        {"COUPONLINK_REDIS_MODE", ""},
		"key-prefix":        {"COUPONLINK_KEY_PREFIX", "couponlink:"},
		"mapping":           {"COUPONLINK_MAPPING", ""},
		"source":            {"COUPONLINK_SOURCE", ""},
		"name":              {"COUPONLINK_CDC_NAME", "default"},
		"metrics-addr":      {"COUPONLINK_RECONCILE_METRICS_ADDR", "127.0.0.1:9465"},
		"log-level":         {"COUPONLINK_LOG_LEVEL", "info"},
		"snapshot-position": {"COUPONLINK_SNAPSHOT_POSITION", "auto"},
	}
	for _, kind := range []string{"mysql", "redis"} {
		env := "COUPONLINK_" + strings.ToUpper(kind) + "_TLS"
		want[kind+"-tls"] = [2]string{env, "off"}
		for _, file := range []string{"ca", "cert", "key"} {
			want[kind+"-tls-"+file] = [2]string{env + "_" + strings.ToUpper(file), ""}
		}
	}
	n := 0
	for _, w := range want { // the test's environment (the servers' exports) does not count
		t.Setenv(w[0], "")
		require.NoError(t, os.Unsetenv(w[0]))
	}
	f.Add(&db, &r, &m, &cp, &met, &lg, &sn)
	f.VisitAll(func(fl *flag.Flag) {
		n++
		w, ok := want[fl.Name]
		if assert.True(t, ok, "unexpected flag -%s", fl.Name) {
			assert.Equal(t, w[0], f.Env(fl.Name), fl.Name)
			assert.Equal(t, w[1], fl.DefValue, fl.Name)
			suffix := " [" + w[0] + "]"
			if f.IsSecret(fl.Name) {
				suffix = " [" + w[0] + "; its value is not shown here]"
			}
			assert.True(t, strings.HasSuffix(fl.Usage, suffix), fl.Usage)
		}
	})
	assert.Equal(t, len(want), n)
	assert.Equal(t, "redis use [COUPONLINK_REDIS_ADDR]", f.Lookup("redis").Usage)
	assert.Equal(t, "source use [COUPONLINK_SOURCE]", f.Lookup("source").Usage)

	require.NoError(t, f.Parse([]string{"-log-level", "WARN", "-snapshot-position", "lock"}))
	assert.Equal(t, slog.LevelWarn, *lg.Level)
	assert.Equal(t, canal.SnapshotLock, *sn.Method)
	assert.ErrorIs(t, f.Parse([]string{"-snapshot-position", "ftwrl"}), ErrUsage)
	assert.ErrorIs(t, f.Parse([]string{"-log-level", "loud"}), ErrUsage)

	cdc := Metrics{Daemon: "cdc"}
	cdc.Register(New("couponlink cdc", "", &bytes.Buffer{}))
	assert.Equal(t, "127.0.0.1:9464", *cdc.Addr)
}

// Wrap adds the groups to a flag set of its own, such as flag.CommandLine,
// and keeps its usage.
func TestWrap(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	called := false
	fs.Usage = func() { called = true }
	f := Wrap(fs)
	var db Database
	f.Add(&db)
	assert.ErrorIs(t, f.Parse([]string{"-h"}), flag.ErrHelp)
	assert.True(t, called)
	assert.Equal(t, "COUPONLINK_MYSQL_DSN", f.Env("dsn"))
	assert.Equal(t, fs.Lookup("dsn"), f.Lookup("dsn"))
}
