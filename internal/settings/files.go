package settings

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
)

// The secrets and the settings that may hold a password (EnvSecret,
// EnvRedacted) can be read from a file, as container secrets are
// mounted: when VAR is empty and VAR_FILE names a file, the flag takes
// the file's content, less one trailing newline. VAR and VAR_FILE both
// set is refused as ambiguous; the command line still wins over both.

// FileEnv is the variable naming a file that holds the flag name's value
// (its variable + "_FILE"), or "" when it has none: a flag that is
// neither secret nor redacted, or whose VAR_FILE is already another flag's
// variable of f (-token-file's COUPONLINK_API_TOKEN_FILE, a file of
// tokens, is not -token's).
func (f *Flags) FileEnv(name string) string {
	fe, ok := f.files[name]
	if !ok || slices.Contains(slices.Collect(maps.Values(f.env)), fe) {
		return ""
	}
	return fe
}

// readFiles sets each flag not given on the command line from the file
// its VAR_FILE names. An error names the variables, or VAR_FILE and the
// path, never a value.
func (f *Flags) readFiles() error {
	given := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, name := range slices.Sorted(maps.Keys(f.files)) {
		fe := f.FileEnv(name)
		path := os.Getenv(fe)
		if fe == "" || path == "" {
			continue
		}
		if env := f.env[name]; os.Getenv(env) != "" {
			return fmt.Errorf("both %s and %s are set: set one of them (the value, or the file holding it)", env, fe)
		}
		if given[name] {
			continue
		}
		v, err := readValueFile(path)
		if err != nil {
			return fmt.Errorf("%s: cannot read %s: %w", fe, path, err)
		}
		if err := f.Lookup(name).Value.Set(v); err != nil { // not f.Set: the flag stays "not given" for Visit
			return fmt.Errorf("%s: the value in %s: %w", fe, path, err)
		}
	}
	return nil
}

// readValueFile is the content of the file path less one trailing
// newline (\n or \r\n); its error is the system's reason alone (the
// caller names the path).
func readValueFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return "", pe.Err
		}
		return "", err
	}
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\r\n"); ok {
		return t, nil
	}
	return strings.TrimSuffix(s, "\n"), nil
}
