package coupon

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Config wires a Store.
type Config struct {
	DB     *sql.DB          // couponlink's MySQL database (parseTime=true, loc=UTC)
	Now    func() time.Time // clock; time.Now when nil
	Logger *slog.Logger
	// MaxAttempts bounds the retries of a transaction that lost a race
	// (optimistic version check, deadlock, lock wait timeout). Default 8.
	MaxAttempts int
	// CombineClaims runs concurrent claims of one template, over all its
	// channel buckets, in one transaction (combiner.go); off: one
	// transaction per claim.
	CombineClaims bool
	// CombineRedemptions runs concurrent redemptions of distinct coupons in
	// one transaction (redeemgroup.go); off: one transaction per redemption.
	CombineRedemptions bool
	// CombineMax is the most requests in one group transaction. Default 256.
	CombineMax int
	// SoldOutMemory remembers the buckets a claim found sold out and
	// refuses their further claims after one read, without a write
	// transaction (soldout.go); off: every claim runs the write path.
	SoldOutMemory bool
}

// Store runs the write path: one MySQL transaction per state change, each
// with its ledger row. It never touches Redis.
type Store struct {
	db          *sql.DB
	now         func() time.Time
	log         *slog.Logger
	maxAttempts int
	rules       sync.Map // template id -> templateRules (immutable once created)

	claims      *combiner[int64, *claimCall] // nil: every claim on the single path
	redemptions *combiner[int, *redeemCall]  // nil: every redemption on the single path
	redeemLanes int
	soldOut     *soldOutMemory // nil: off
	claimStats  groupStats
	redeemStats groupStats
	groupFault  func(stage string, size int) error // tests: fails or races a group transaction
}

// New returns a Store on cfg.DB.
func New(cfg Config) (*Store, error) {
	if cfg.DB == nil {
		return nil, errors.New("coupon: Config.DB is nil")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 8
	}
	if cfg.CombineMax <= 0 {
		cfg.CombineMax = 256
	}
	s := &Store{db: cfg.DB, now: cfg.Now, log: cfg.Logger, maxAttempts: cfg.MaxAttempts, redeemLanes: redeemLanes}
	if cfg.CombineClaims {
		s.claims = newCombiner[int64](s, cfg.CombineMax, &s.claimStats, s.runClaimGroup)
	}
	if cfg.SoldOutMemory {
		s.soldOut = newSoldOutMemory(s, cfg.CombineMax)
	}
	if cfg.CombineRedemptions {
		s.redemptions = newCombiner[int](s, cfg.CombineMax, &s.redeemStats, s.runRedeemGroup)
	}
	return s, nil
}

// DB is the store's database, for read-only views in other packages.
func (s *Store) DB() *sql.DB { return s.db }

// clock is the store's time, in UTC at MySQL's DATETIME(6) precision.
func (s *Store) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Now is the store's clock: the time its writes stamp.
func (s *Store) Now() time.Time { return s.clock() }

// errRaceLost means another transaction changed the row between our read
// and our write (version check failed): the attempt is rolled back and run
// again from the start, where it sees the new state.
var errRaceLost = errors.New("lost a race on user_coupon.version")

// retry runs attempt until it succeeds, fails for a reason other than a
// lost race, or runs out of attempts.
func (s *Store) retry(ctx context.Context, what string, attempt func() error) error {
	var err error
	for i := 0; i < s.maxAttempts; i++ {
		err = attempt()
		if err == nil || !retryable(err) {
			return err
		}
		// a short, growing pause lets the winner commit
		if err := pause(ctx, time.Duration(i*i)*time.Millisecond); err != nil {
			return err
		}
	}
	s.log.Warn("gave up after repeated races", "op", what, "attempts", s.maxAttempts, "err", err)
	return &Error{Code: api.CodeConflict, Message: fmt.Sprintf(
		"%s lost a race with concurrent changes %d times; nothing was written; retry the request", what, s.maxAttempts)}
}

// pause waits for d, or returns ctx's error as soon as ctx is done.
func pause(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d): // an unfired timer is collected once unreferenced
		return nil
	}
}

func retryable(err error) bool {
	if errors.Is(err, errRaceLost) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		// deadlock, lock wait timeout, auto-increment lock lost to a bulk insert
		return me.Number == 1213 || me.Number == 1205 || me.Number == 1467
	}
	return false
}

func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// couponRow is user_coupon as the write path reads it.
type couponRow struct {
	ID         int64
	TemplateID int64
	UserID     string
	Channel    string
	Status     Status
	OrderID    sql.NullString
	Version    int64
	ClaimedAt  time.Time
	RedeemedAt sql.NullTime
	ExpiresAt  time.Time
	RequestID  sql.NullString
}

const couponColumns = `id, template_id, user_id, channel, status, order_id, version, claimed_at, redeemed_at, expires_at, request_id`

type rowScanner interface{ Scan(...any) error }

func scanCoupon(r rowScanner) (couponRow, error) {
	var c couponRow
	err := r.Scan(&c.ID, &c.TemplateID, &c.UserID, &c.Channel, &c.Status, &c.OrderID, &c.Version,
		&c.ClaimedAt, &c.RedeemedAt, &c.ExpiresAt, &c.RequestID)
	return c, err
}

// loadCoupon reads one coupon, or returns a not_found *Error.
func loadCoupon(ctx context.Context, q sqltx.Querier, id int64) (couponRow, error) {
	cs, err := couponsByID(ctx, q, []any{id})
	if err != nil {
		return couponRow{}, err
	}
	c, ok := cs[id]
	if !ok {
		return c, couponNotFound(id)
	}
	return c, nil
}

func couponNotFound(id int64) *Error { return NotFound("user coupon", id) }

// flowRow is one inventory_flow row to write.
type flowRow struct {
	Coupon   couponRow
	Kind     string
	Seq      int64
	From, To Status
	Mode     string
	OrderID  string
	Reason   string
	Operator string
	// OnBehalfOf is who the operator acted for (a void sent with a token
	// for someone else), "" for none.
	OnBehalfOf string
	RequestID  string
	CreatedAt  time.Time
}

// The kinds of inventory_flow rows.
const (
	FlowRefund     = "refund"
	FlowExpire     = "expire"
	FlowVoid       = "void"
	FlowRelease    = "release"
	FlowCorrection = "correction"
)

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
