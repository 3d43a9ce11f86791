package primaries

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/migrations"
)

// Pool is an open pool on one primary of the list.
type Pool struct {
	Primary
	DB *sql.DB
}

// Open opens a pool of at most maxConns connections on each primary, each
// connection keeping the rule (mysqlconn.OpenPrimary). On an error the
// pools already opened are closed.
func Open(ps []Primary, maxConns int) ([]Pool, error) {
	out := make([]Pool, 0, len(ps))
	for k, p := range ps {
		db, err := mysqlconn.OpenPrimary(p.DSN, maxConns, len(ps), k)
		if err != nil {
			Close(out)
			return nil, fmt.Errorf("primary %s: %w", p.Name, err)
		}
		out = append(out, Pool{Primary: p, DB: db})
	}
	return out, nil
}

// Close closes every pool.
func Close(pools []Pool) {
	for _, p := range pools {
		_ = p.DB.Close()
	}
}

// Check proves, before the API serves, that each primary answers, is
// migrated to the binary's schema, is not another primary of the list
// under a second name, hands out ids by the rule on every connection, and
// holds no template or coupon whose id breaks the rule. The error names the
// primary and, for a broken rule, the first offending id.
func Check(ctx context.Context, pools []Pool) error {
	latest, err := migrations.Latest()
	if err != nil {
		return err
	}
	seen := map[string]string{}
	for _, p := range pools {
		if err := p.DB.PingContext(ctx); err != nil {
			return fmt.Errorf("primary %s: MySQL does not answer: %w", p.Name, err)
		}
		id, err := identity(ctx, p.DB)
		if err != nil {
			return fmt.Errorf("primary %s: %w", p.Name, err)
		}
		if other, ok := seen[id]; ok {
			return fmt.Errorf("primaries %s and %s are one database (%s): each primary is its own", other, p.Name, id)
		}
		seen[id] = p.Name
	}
	// the id scans read every coupon id once: all primaries at once
	errs := make([]error, len(pools))
	var g errgroup.Group
	for k, p := range pools {
		g.Go(func() error {
			if err := checkOne(ctx, p, k, len(pools), latest); err != nil {
				errs[k] = fmt.Errorf("primary %s (%d of the list, from 0, of %d): %w", p.Name, k, len(pools), err)
			}
			return nil
		})
	}
	_ = g.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func checkOne(ctx context.Context, p Pool, k, n int, latest uint) error {
	v, dirty, err := migrations.Version(ctx, p.DB)
	switch {
	case err != nil:
		return err
	case dirty:
		return fmt.Errorf("the schema is dirty at version %d: a migration failed half-way", v)
	case v != latest:
		return fmt.Errorf("the schema is at version %d, this couponlink needs %d: run `couponlink migrate -dsn <its DSN>` on it", v, latest)
	}
	var inc, off int
	if err := p.DB.QueryRowContext(ctx, "SELECT @@session.auto_increment_increment, @@session.auto_increment_offset").Scan(&inc, &off); err != nil {
		return fmt.Errorf("read auto_increment settings: %w", err)
	}
	if inc != n || off != k+1 {
		return fmt.Errorf("the connection has auto_increment_increment %d and auto_increment_offset %d, want %d and %d "+
			"(does something between couponlink and MySQL drop session variables?)", inc, off, n, k+1)
	}
	for _, table := range []string{"coupon_template", "user_coupon"} {
		var id int64
		err := p.DB.QueryRowContext(ctx, "SELECT id FROM "+table+" WHERE MOD(id - 1, ?) <> ? ORDER BY id LIMIT 1", n, k).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("look for %s ids off the rule: %w", table, err)
		}
		return fmt.Errorf("%s id %d breaks the rule: (id - 1) mod %d is %d, but this is primary %d of the list (from 0); "+
			"the list of primaries is fixed once ids exist (a primary added, removed or moved changes the owner of every id): "+
			"start with the list these ids were written under", table, id, n, Owner(id, n), k)
	}
	return nil
}

// identity names the database p is on as the server sees it: two entries
// of the list on one database (an alias of a host name) would hand out
// the same ids twice.
func identity(ctx context.Context, db *sql.DB) (string, error) {
	var host, dir, name string
	var port int
	if err := db.QueryRowContext(ctx, "SELECT @@hostname, @@port, @@datadir, DATABASE()").Scan(&host, &port, &dir, &name); err != nil {
		return "", fmt.Errorf("read server identity: %w", err)
	}
	return fmt.Sprintf("%s:%d %s database %s", host, port, dir, name), nil
}

// Place is where a new template goes: the primary with the fewest
// templates, the first of the list on a tie. A primary that does not
// answer is passed over; none answering is an error.
func Place(ctx context.Context, pools []Pool) (int, error) {
	counts := make([]int64, len(pools))
	errs := make([]error, len(pools))
	var g errgroup.Group
	for k, p := range pools {
		g.Go(func() error {
			errs[k] = p.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM coupon_template").Scan(&counts[k])
			return nil
		})
	}
	_ = g.Wait()
	best := -1
	for k := range pools {
		if errs[k] == nil && (best < 0 || counts[k] < counts[best]) {
			best = k
		}
	}
	if best < 0 {
		return -1, fmt.Errorf("count templates: no primary answers: %w", errors.Join(errs...))
	}
	return best, nil
}
