package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/couponlink/couponlink/canal"
)

// Every layout of the legacy phase but the sharded shop is a deploy/legacy
// directory, and its mapping, moved to the bench's schema, loads and
// names that schema's tables for the no-op reader.
func TestLegacyShopsMappings(t *testing.T) {
	repo := filepath.Join("..", "..")
	dirs, err := os.ReadDir(filepath.Join(repo, "deploy", "legacy"))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, l := range legacyShops {
		text, source, err := l.mapping(repo, "legacy_x", "root@tcp(127.0.0.1:1)/cl_x")
		if err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		m, err := canal.LoadMapping([]byte(text))
		if err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		if (source != "") != (l.name == "sharded") {
			t.Errorf("%s: source %q", l.name, source)
		}
		for _, table := range m.SourceTables() {
			if sch, _ := m.SchemaTable(table); sch != "legacy_x" {
				t.Errorf("%s: table %s is not in the bench's schema", l.name, table)
			}
		}
		covered[l.name] = true
	}
	for _, d := range dirs {
		if !covered[d.Name()] {
			t.Errorf("deploy/legacy/%s is not a layout of the legacy phase", d.Name())
		}
	}
}
