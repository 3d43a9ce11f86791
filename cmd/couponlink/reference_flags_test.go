package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/settings"
)

// envOnly are the COUPONLINK_* variables the code reads that no flag
// sets, each with the reason it has no flag. The reference lists them; a
// variable the code reads that is neither a flag's nor here fails
// TestReference.
var envOnly = map[string]string{
	"COUPONLINK_TEST_MYSQL_DSN":     "the tests' MariaDB (internal/testenv); set by deploy/local/servers.sh, read by no command",
	"COUPONLINK_TEST_REDIS_ADDR":    "the tests' Redis (internal/testenv); set by deploy/local/servers.sh, read by no command",
	"COUPONLINK_TEST_RABBITMQ_ADDR": "the tests' RabbitMQ broker (internal/testenv; default 127.0.0.1:5672, vhosts made with rabbitmqctl), read by no command",
	"COUPONLINK_TEST_VERBOSE":       "the tests' own logs on stderr at debug level (internal/testenv); read by no command",
}

// flagsReference is the flags section of docs/configuration.md: every
// command's flags, every variable with its flags, the variables without
// one.
func flagsReference(t *testing.T) string {
	sets := FlagSets()
	var b strings.Builder
	b.WriteString("## Every command's flags\n\n" +
		"Each command's flags as `couponlink <command> -h` lists them: the variable that sets each " +
		"(the flag given on the command line wins), and its default when no variable is set.\n")
	for _, f := range sets {
		writeFlags(&b, f)
	}
	vars := flagVariables(sets)
	writeVariables(&b, vars)
	writeEnvOnly(t, &b, vars)
	return b.String()
}

// writeFlags writes the table of f's flags.
func writeFlags(b *strings.Builder, f *settings.Flags) {
	fmt.Fprintf(b, "\n### `%s`\n\n%s\n\n", f.Name(), cell(f.Summary()))
	if countFlags(f) == 0 {
		b.WriteString("No flags.\n")
		return
	}
	b.WriteString("| flag | variable | default | meaning |\n|---|---|---|---|\n")
	f.VisitAll(func(fl *flag.Flag) {
		kind, usage := flag.UnquoteUsage(fl)
		name := "-" + fl.Name
		if kind != "" {
			name += " " + kind
		}
		env := f.Env(fl.Name)
		variable := "—, command line only"
		if env != "" {
			variable = "`" + env + "`"
			usage = usage[:strings.LastIndex(usage, " ["+env)] // the variable has its column
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", name, variable, defaultOf(f, fl), cell(usage))
	})
}

func countFlags(f *settings.Flags) int {
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	return n
}

// defaultOf is fl's default as the reference shows it: a secret's never.
func defaultOf(f *settings.Flags, fl *flag.Flag) string {
	switch {
	case f.IsSecret(fl.Name):
		return "*empty; a secret, never shown*"
	case fl.DefValue == "":
		return "*empty*"
	}
	return "`" + fl.DefValue + "`"
}

// flagVariables maps each variable of sets to its flags and their
// commands: "`-name` (cdc, reconcile)"; a VAR_FILE (settings.Flags.FileEnv)
// to "a file holding the value of `-name` (cdc, reconcile)".
func flagVariables(sets []*settings.Flags) map[string][]string {
	cmds := map[string]map[string][]string{} // variable -> flag -> commands
	add := func(env, label, cmd string) {
		if cmds[env] == nil {
			cmds[env] = map[string][]string{}
		}
		cmds[env][label] = append(cmds[env][label], cmd)
	}
	for _, f := range sets {
		cmd := strings.TrimPrefix(f.Name(), "couponlink ")
		f.VisitAll(func(fl *flag.Flag) {
			if env := f.Env(fl.Name); env != "" {
				add(env, "`-"+fl.Name+"`", cmd)
			}
			if fe := f.FileEnv(fl.Name); fe != "" {
				add(fe, "a file holding the value of `-"+fl.Name+"`", cmd)
			}
		})
	}
	out := map[string][]string{}
	for env, flags := range cmds {
		for label, in := range flags {
			out[env] = append(out[env], fmt.Sprintf("%s (%s)", label, strings.Join(in, ", ")))
		}
		sort.Strings(out[env])
	}
	return out
}

// writeVariables writes every variable with its flags.
func writeVariables(b *strings.Builder, vars map[string][]string) {
	b.WriteString("\n## Every variable\n\nEvery `COUPONLINK_*` variable a command reads, and the flags it sets " +
		"(their meaning and default in the tables above).\n\n| variable | flag (commands) |\n|---|---|\n")
	for _, env := range slices.Sorted(maps.Keys(vars)) {
		fmt.Fprintf(b, "| `%s` | %s |\n", env, strings.Join(vars[env], "; "))
	}
}

// writeEnvOnly writes the variables the code reads without a flag, and
// fails t when one has no reason in envOnly, or envOnly names a variable
// that the code does not read or that a flag has.
func writeEnvOnly(t *testing.T, b *strings.Builder, vars map[string][]string) {
	read := variablesRead(t)
	b.WriteString("\n## Variables without a flag\n\nThe variables the code reads that no flag sets, and why.\n\n" +
		"| variable | read in | why no flag |\n|---|---|---|\n")
	for _, env := range slices.Sorted(maps.Keys(read)) {
		if vars[env] != nil {
			assert.NotContains(t, envOnly, env, "%s is a flag's variable: drop it from envOnly", env)
			continue
		}
		why, ok := envOnly[env]
		if !assert.True(t, ok, "%s (read in %s) has no flag and no reason in envOnly (reference_flags_test.go): give it a flag or a reason",
			env, strings.Join(read[env], ", ")) {
			continue
		}
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", env, strings.Join(read[env], ", "), cell(why))
	}
	for env := range envOnly {
		assert.Contains(t, read, env, "envOnly names %s, which no code reads any more", env)
	}
}

// envReaders are the calls that read a variable named by a string
// argument: os.Getenv, os.LookupEnv and the environment-backed flags of
// settings.Flags.
var envReaders = []string{"Getenv", "LookupEnv", "EnvString", "EnvSecret", "EnvDuration", "EnvInt", "EnvFloat", "EnvBool", "EnvVar"}

// variablesRead are the COUPONLINK_* variables the repository's Go code
// (not its tests) names in a call of envReaders, each with the
// directories that read it.
func variablesRead(t *testing.T) map[string][]string {
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != repoRoot || d.Name() == "node_modules" || d.Name() == "testdata") {
			return skipDir(err, d)
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(repoRoot, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		for _, env := range envNames(file) {
			if !slices.Contains(out[env], dir) {
				out[env] = append(out[env], dir)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

func skipDir(err error, d fs.DirEntry) error {
	if err != nil {
		return err
	}
	return filepath.SkipDir
}

// envNames are the COUPONLINK_* literals the calls of envReaders in file
// take as an argument.
func envNames(file *ast.File) []string {
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !slices.Contains(envReaders, sel.Sel.Name) {
			return true
		}
		for _, arg := range call.Args {
			if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, "COUPONLINK_") {
					out = append(out, s)
				}
			}
		}
		return true
	})
	return out
}
