package console_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/migrations"
)

// The console of a legacy shop, in headless Chromium: the write-off-table
// layout of deploy/legacy over two servers (sources east and west, one
// cdc each), `couponlink api -mapping`, and e2e/legacy.test.mjs, which
// compares the pages with `couponlink status -mapping -json`, writes in
// the shop's tables through the test's shop endpoint (POST /claim) and
// kills west (POST /kill).

const layout = "../deploy/legacy/writeoff-table"

// legacyServer is one source: its MariaDB and couponlink's DSN there.
type legacyServer struct {
	name  string
	maria *testenv.MariaDB
	db    *sql.DB // root, on the shop's schema
	dsn   string  // couponlink's database
}

func newLegacyServer(t *testing.T, name string, id int) *legacyServer {
	m := testenv.OwnMariaDBWithID(t, id)
	cfg, err := mysql.ParseDSN(m.ServerDSN)
	require.NoError(t, err)
	cfg.DBName = "couponlink"
	s := &legacyServer{name: name, maria: m, dsn: cfg.FormatDSN()}
	_, err = migrations.Up(s.dsn)
	require.NoError(t, err)
	root, err := mysqlconn.Open(m.ServerDSN, 2)
	require.NoError(t, err)
	defer root.Close()
	_, err = root.Exec("CREATE DATABASE shop")
	require.NoError(t, err)
	cfg.DBName, cfg.MultiStatements = "shop", true
	s.db, err = sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.db.Close() })
	schema, err := os.ReadFile(filepath.Join(layout, "schema.sql"))
	require.NoError(t, err)
	_, err = s.db.Exec(string(schema))
	require.NoError(t, err)
	_, err = s.db.Exec(`INSERT INTO campaign VALUES (1, 'e2e legacy spring', 100, 100, 2, '2099-01-01 00:00:00')`)
	require.NoError(t, err)
	return s
}

// claim takes a coupon of campaign 1 as the shop does: the stock guard and
// the coupon row in one transaction.
func (s *legacyServer) claim(member int64, source int, used bool) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(`UPDATE campaign SET stock_left = stock_left - 1 WHERE id = 1 AND stock_left > 0`); err != nil {
		return err
	}
	res, err := tx.Exec(`INSERT INTO coupon (campaign_id, member_id, source, state) VALUES (1, ?, ?, 10)`, member, source)
	if err != nil {
		return err
	}
	if used {
		id, _ := res.LastInsertId()
		if _, err := tx.Exec(`UPDATE coupon SET state = 20, order_no = ? WHERE id = ?`, fmt.Sprint("o", id), id); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO coupon_writeoff (coupon_id, order_no, store_id) VALUES (?, ?, 1)`, id, fmt.Sprint("o", id)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func TestLegacyConsoleInABrowser(t *testing.T) {
	browserTools(t)
	bin := testenv.BuildCouponlink(t)
	east, west := newLegacyServer(t, "east", 1), newLegacyServer(t, "west", 2)
	mapping, err := os.ReadFile(filepath.Join(layout, "mapping.yaml"))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "mapping.yaml")
	require.NoError(t, os.WriteFile(file, fmt.Appendf(mapping, "sources:\n  - {name: east, dsn: %q}\n  - {name: west, dsn: %q}\n", east.dsn, west.dsn), 0o600))
	for i := range 12 { // channels 1 app, 2 mini program, 3 store; every third used
		srv := []*legacyServer{east, west}[i%2]
		require.NoError(t, srv.claim(int64(i), 1+i%3, i%3 == 0))
	}

	logs := t.TempDir()
	for _, srv := range []*legacyServer{east, west} {
		start(t, bin, filepath.Join(logs, "cdc-"+srv.name+".log"), "cdc", "-mapping", file, "-source", srv.name, "-redis", "", "-redis-mode", "off",
			"-metrics-addr", testenv.FreeAddr(t), "-batch-wait", "5ms")
	}
	apiAddr := testenv.FreeAddr(t)
	const token = "e2e1e9ac75e5eed0123456789abcdef0123456789abcdef0123456789abcdef02" // 32 bytes in hex: a weak token is refused
	start(t, bin, filepath.Join(logs, "api.log"), "api", "-dsn", east.dsn, "-mapping", file, "-addr", apiAddr, "-token", token, "-expire-interval", "0")
	base := "http://" + apiAddr
	cdctest.WaitFor(t, 60*time.Second, "the api answers and both sources have their checkpoint", func() bool {
		out, err := exec.Command(bin, "status", "-mapping", file, "-json").Output()
		return err == nil && strings.Contains(string(out), `"complete": true`) && healthy(base)
	})

	// the shop, for the browser test: a claim on a source, and a source killed
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv := map[string]*legacyServer{"east": east, "west": west}[r.URL.Query().Get("source")]
		switch {
		case srv == nil:
			http.Error(w, "no such source", http.StatusBadRequest)
		case r.URL.Path == "/claim":
			if err := srv.claim(time.Now().UnixNano(), 1, false); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		case r.URL.Path == "/kill":
			srv.maria.Stop(syscall.SIGKILL)
		}
	}))
	t.Cleanup(shop.Close)

	runScript(t, "legacy.test.mjs", logs, []string{"cdc-east.log", "cdc-west.log", "api.log"},
		[]string{"legacy-campaigns.png", "legacy-campaign.png", "legacy-policy.png", "legacy-source-down.png"},
		"CONSOLE_BASE="+base, "CONSOLE_TOKEN="+token, "CONSOLE_SHOP="+shop.URL, "CONSOLE_STATUS="+bin+" status -json -mapping "+file)
}

// healthy reports whether the API answers /healthz.
func healthy(base string) bool {
	res, err := http.Get(base + "/healthz")
	if err == nil {
		res.Body.Close()
	}
	return err == nil && res.StatusCode == http.StatusOK
}
