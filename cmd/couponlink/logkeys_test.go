package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// logFirstKey is where the key-value pairs start in the arguments of a
// log/slog method: after the message, and after the context and the level.
var logFirstKey = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "With": 0,
}

// Every log line of couponlink names its error "err", so that an operator
// finds every failure with one filter: no production file of the module
// logs an error (a value named err or ...Err, or x.Error()) under another
// key, nor uses a key such as "error" or "cause".
func TestLogsNameErrorsErr(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if key, pos, ok := badErrorKey(n); ok {
				bad = append(bad, fset.Position(pos).String()+": "+strconv.Quote(key))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("log an error as \"err\", err; these use another key:\n%s", strings.Join(bad, "\n"))
	}
}

// badErrorKey reports the first key of a log call that carries an error
// under another name than "err".
func badErrorKey(n ast.Node) (string, token.Pos, bool) {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return "", 0, false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", 0, false
	}
	first, ok := logFirstKey[sel.Sel.Name]
	if pkg, _ := sel.X.(*ast.Ident); !ok || pkg != nil && pkg.Name == "http" { // http.Error(w, msg, code)
		return "", 0, false
	}
	for i := first; i+1 < len(call.Args); i += 2 {
		lit, ok := call.Args[i].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			i-- // a slog.Attr takes one argument
			continue
		}
		key, _ := strconv.Unquote(lit.Value)
		if key != "err" && (isErrorKey(key) || looksLikeError(call.Args[i+1])) {
			return key, lit.Pos(), true
		}
	}
	return "", 0, false
}

func isErrorKey(key string) bool {
	return key == "error" || key == "cause" || strings.HasSuffix(key, "_error") || strings.HasSuffix(key, "_err")
}

// looksLikeError: err, fooErr, x.lastErr, err.Error(), f(err.Error()).
func looksLikeError(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "err" || strings.HasSuffix(e.Name, "Err")
	case *ast.SelectorExpr:
		return e.Sel.Name == "err" || strings.HasSuffix(e.Sel.Name, "Err")
	case *ast.ParenExpr:
		return looksLikeError(e.X)
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Error" && len(e.Args) == 0 {
			return true
		}
		for _, a := range e.Args {
			if looksLikeError(a) {
				return true
			}
		}
	}
	return false
}
