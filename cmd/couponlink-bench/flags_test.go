package main

import (
	"flag"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestListFlags(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		read     func(string) (any, error)
		want     any
		err      string
	}{
		{"modes", "file, gtid", rd(modesList), []string{"file", "gtid"}, ""},
		{"modes keep order and repeats", "gtid,file,gtid", rd(modesList), []string{"gtid", "file", "gtid"}, ""},
		{"modes unknown", "file,pos", rd(modesList), nil, `-modes: unknown start mode "pos" (want file, gtid)`},
		{"modes empty", " , ", rd(modesList), nil, "-modes: name at least one start mode (file, gtid)"},
		{"rates", "5000,1000", rd(ratesList), []int{5000, 1000}, ""},
		{"rates zero", "1000,0", rd(ratesList), nil, `-lag-rates: "0" is not a positive rate`},
		{"rates not a number", "1k", rd(ratesList), nil, `-lag-rates: "1k" is not a positive rate`},
		{"rates empty", "", rd(ratesList), nil, "-lag-rates: name at least one rate"},
		{"rows sorted, each once", "10000000,1000000,1000000", rd(recRowsList), []int64{1_000_000, 10_000_000}, ""},
		{"rows not a multiple of 1,000", "1500", rd(recRowsList), nil, `-reconcile-rows: "1500" is not a positive multiple of 1,000`},
		{"rows negative", "-1000", rd(recRowsList), nil, `-reconcile-rows: "-1000" is not a positive multiple of 1,000`},
		{"rows empty", ",", rd(recRowsList), nil, "-reconcile-rows: name at least one size"},
		{"shards sorted, each once", "256,4,4", rd(shardsList), []int{4, 256}, ""},
		{"shards bounds", "1,4096", rd(shardsList), []int{1, 4096}, ""},
		{"shards too many", "4097", rd(shardsList), nil, `-sources-shards: "4097" is not a table count (1..4096)`},
		{"shards zero", "0", rd(shardsList), nil, `-sources-shards: "0" is not a table count (1..4096)`},
		{"shards empty", "", rd(shardsList), nil, "-sources-shards: name at least one table count"},
		{"layouts", "sharded, writeoff-table", rd(layoutsList), []string{"sharded", "writeoff-table"}, ""},
		{"layouts unknown", "writeoff", rd(layoutsList), nil, `-legacy-layouts: "writeoff" is no layout (want writeoff-table, no-writeoff, order-columns, orders-writeoff, sharded)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.read(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalAny(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// rd adapts a listFlag's read to the table.
func rd[T interface{ ~int | ~int64 | ~string }](l listFlag[T]) func(string) (any, error) {
	return func(s string) (any, error) { return l.read(s) }
}

func equalAny(a, b any) bool {
	switch x := a.(type) {
	case []string:
		return slices.Equal(x, b.([]string))
	case []int:
		return slices.Equal(x, b.([]int))
	case []int64:
		return slices.Equal(x, b.([]int64))
	}
	return false
}

func TestListFields(t *testing.T) {
	if got := listFields(" a, ,b ,,c"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("listFields: %q", got)
	}
	if got := listFields(""); len(got) != 0 {
		t.Fatalf("listFields of nothing: %q", got)
	}
}

// parseConfig runs the flags and finish over args, as run does.
func parseConfig(t *testing.T, args ...string) (*config, *listFlags, error) {
	t.Helper()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, l := defineFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	return cfg, l, cfg.finish(*l, fs)
}

func TestConfigDefaults(t *testing.T) {
	cfg, l, err := parseConfig(t, "-repo", "/r")
	if err != nil {
		t.Fatal(err)
	}
	if *l.logging.Level != slog.LevelInfo {
		t.Errorf("log level %v, want info", *l.logging.Level)
	}
	if !slices.Equal(cfg.modes, []string{"file", "gtid"}) || !slices.Equal(cfg.lagRates, []int{1000, 5000}) ||
		!slices.Equal(cfg.recRows, []int64{1_000_000, 10_000_000}) || !slices.Equal(cfg.sourcesShards, []int{4, 256}) {
		t.Errorf("lists %v %v %v %v", cfg.modes, cfg.lagRates, cfg.recRows, cfg.sourcesShards)
	}
	if cfg.out != "/r/bench/results" || cfg.cpuprofile != filepath.Join("/r/bench/results", cfg.stamp+"-cdc-catchup.pprof") {
		t.Errorf("out %q, cpuprofile %q", cfg.out, cfg.cpuprofile)
	}
	if cfg.backlogSingle != 500_000 || cfg.reps != 3 || cfg.lagDuration != 10*time.Second || cfg.batchWait != -1 {
		t.Errorf("sizes %+v", cfg)
	}
}

func TestConfigPresets(t *testing.T) {
	cfg, _, err := parseConfig(t, "-repo", "/r", "-smoke", "-log-level", "warn", "-lag-rates", "7")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.lagRates, []int{1000}) || !slices.Equal(cfg.recRows, []int64{10_000, 50_000}) ||
		!slices.Equal(cfg.sourcesShards, []int{4, 8}) || cfg.backlogSingle != 2_000 || cfg.apiDuration != time.Second {
		t.Errorf("smoke preset not applied: %+v", cfg)
	}
	if !strings.HasSuffix(cfg.out, "couponlink-bench-smoke") {
		t.Errorf("smoke out %q: want the temporary directory", cfg.out)
	}
	if cfg, _, err = parseConfig(t, "-repo", "/r", "-smoke", "-out", "res"); err != nil || cfg.out != "/r/res" {
		t.Errorf("smoke with -out: %q, %v", cfg.out, err)
	}
	if cfg, _, err = parseConfig(t, "-repo", "/r", "-quick"); err != nil ||
		!slices.Equal(cfg.recRows, []int64{100_000, 1_000_000}) || cfg.reps != 1 || cfg.backlogBatched != 50_000 {
		t.Errorf("quick preset not applied: %+v, %v", cfg, err)
	}
}

func TestConfigRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"-phases", "lags"},
		{"-phases", "api,"},
		{"-reps", "0"},
		{"-writers", "-1"},
		{"-sources-rows", "999"},
		{"-sources-reps", "0"},
		{"-modes", "binlog"},
		{"-log-level", "loud"},
		{"-reconcile-rows", "10"},
	} {
		if _, _, err := parseConfig(t, append([]string{"-repo", "/r"}, args...)...); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
	cfg, l, err := parseConfig(t, "-repo", "/r", "-log-level", "debug", "-phases", "api")
	if err != nil || *l.logging.Level != slog.LevelDebug || cfg.phases != "api" {
		t.Errorf("-log-level debug -phases api: %v, %v, %v", *l.logging.Level, cfg.phases, err)
	}
}

func TestCDCFlags(t *testing.T) {
	for _, tc := range []struct {
		rows  int
		wait  time.Duration
		flags string
		desc  string
	}{
		{0, -1, "", "cdc batching at couponlink's defaults (-batch-rows, -batch-wait unset)"},
		{500, -1, "-batch-rows 500", "cdc -batch-rows 500"},
		{0, 0, "-batch-wait 0s", "cdc -batch-wait 0s"},
		{10, 5 * time.Millisecond, "-batch-rows 10 -batch-wait 5ms", "cdc -batch-rows 10 -batch-wait 5ms"},
	} {
		c := config{batchRows: tc.rows, batchWait: tc.wait}
		if got := strings.Join(c.cdcFlags(), " "); got != tc.flags {
			t.Errorf("cdcFlags %q, want %q", got, tc.flags)
		}
		if got := c.cdcSettings(); got != tc.desc {
			t.Errorf("cdcSettings %q, want %q", got, tc.desc)
		}
	}
}
