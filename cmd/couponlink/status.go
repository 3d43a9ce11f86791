package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/internal/words"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/inventory/view"
	"github.com/couponlink/couponlink/quota"
	"github.com/couponlink/couponlink/reconcile"
)

// statusSettings are couponlink status's flags.
type statusSettings struct {
	db      settings.Database
	mapping settings.Mapping
	cp      settings.Checkpoint
	// with several sources, how long a source may take to answer
	timeout *time.Duration
	// what to print, on the command line only: a template's channels, JSON
	template *int64
	asJSON   *bool
}

func statusFlags(stderr io.Writer) (*settings.Flags, *statusSettings) {
	f := newFlags("status", "Prints where the cdc stands: checkpoint, lag, events applied, anomalies, and per template and channel the derived states. "+
		"With -mapping (a legacy schema), also each template's name, budget, remaining stock, claimable and end time, and the channels' labels. "+
		"With -template, prints that template's channels instead: quota, claims, counts, redemption rate and last quota transfer "+
		"(for a legacy template: its row in the shop's template table and its channels' counts). "+
		"With a mapping of several sources, asks every source's server at once: each source's state, checkpoint and lag, then the "+
		"counts summed over the sources that answered, saying which each sum holds and which it leaves out.", stderr)
	o := &statusSettings{
		mapping: settings.Mapping{FileUse: "YAML mapping of the legacy schema the cdc reads (default: the reference schema)",
			SourceUse: "with a mapping of several sources: print this source's status alone, on its server (default: every source, summed)"},
		cp: settings.Checkpoint{Use: "checkpoint name of the cdc whose status to print"},
	}
	f.Add(&o.db, &o.mapping, &o.cp)
	o.timeout = f.EnvDuration("timeout", "COUPONLINK_STATUS_TIMEOUT", 5*time.Second, "with several sources: how long each source's server may take to answer before it is shown down")
	o.template = f.Int64("template", 0, "print the channels of this template")
	o.asJSON = f.Bool("json", false, "print as JSON: the status (what GET /status of the cdc's ops server answers), or with -template the channels")
	return f, o
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, o := statusFlags(stderr)
	if err := f.Parse(args); err != nil {
		return err
	}
	m, err := readMapping(*o.mapping.File)
	if err != nil {
		return err
	}
	if m == nil && *o.mapping.Source != "" {
		return errors.New("-source needs a -mapping that names sources")
	}
	if m != nil && m.HasSources() && *o.mapping.Source == "" {
		return reportDomain(stderr, "status", printSourcesStatus(ctx, m, *o.template, *o.asJSON, *o.timeout, stdout))
	}
	if m != nil {
		var sourceDSN string
		if m, sourceDSN, err = m.OneSource(*o.mapping.Source); err != nil {
			return err
		}
		if *o.mapping.Source != "" {
			*o.db.DSN, *o.cp.Name = sourceDSN, *o.mapping.Source // the source's server, and its checkpoint
		}
	}
	db, err := openMySQL(*o.db.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	if *o.template > 0 {
		if m != nil {
			return reportDomain(stderr, "status", printLegacyTemplate(ctx, db, m, *o.template, *o.asJSON, stdout))
		}
		return reportDomain(stderr, "status", printChannels(ctx, db, *o.template, *o.asJSON, stdout))
	}
	if *o.asJSON {
		return writeStatusJSON(ctx, stdout, db, *o.cp.Name, m)
	}
	st, err := inventory.ReadMappedStatus(ctx, db, *o.cp.Name, m)
	if err != nil {
		return err
	}
	if !st.Found {
		fmt.Fprintf(stdout, "no checkpoint %q yet: the cdc has not run against this database\n", *o.cp.Name)
		return nil
	}
	printCheckpoint(stdout, st)
	if err := printLastReconcile(ctx, stdout, db); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if err := printPairs(stdout, st.Pairs, nil); err != nil {
		return err
	}
	return printLegacyTemplates(stdout, st.Templates, nil)
}

// printLastReconcile prints the last reconcile pass and what it
// corrected, by store (Redis keys and claimed-set members included).
func printLastReconcile(ctx context.Context, stdout io.Writer, db *sql.DB) error {
	passes, err := reconcile.RecentPasses(ctx, db, 1)
	if err != nil {
		return err
	}
	if len(passes) == 0 {
		fmt.Fprintln(stdout, "last reconcile  none yet")
		return nil
	}
	p := passes[0]
	line := fmt.Sprintf("last reconcile  task %d %s at %s", p.TaskID, p.Status, p.StartedAt.Format(time.RFC3339))
	if len(p.Corrected) > 0 {
		stores := slices.Sorted(maps.Keys(p.Corrected))
		parts := make([]string, len(stores))
		for i, s := range stores {
			parts[i] = fmt.Sprintf("%s %d", s, p.Corrected[s])
		}
		line += "; corrected: " + strings.Join(parts, ", ")
	}
	fmt.Fprintln(stdout, line)
	return nil
}

// readMapping loads a legacy mapping file; nil for none (the reference
// schema).
func readMapping(path string) (*canal.Mapping, error) {
	if path == "" {
		return nil, nil
	}
	return canal.ReadMappingFile(path)
}

// printCheckpoint prints where the cdc stands, its anomalies and the
// webhook outbox.
func printCheckpoint(stdout io.Writer, st inventory.Status) {
	cp := st.Checkpoint
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "checkpoint\t%s\n", cp.Pos)
	fmt.Fprintf(w, "server binlog\t%s\n", st.Server)
	fmt.Fprintf(w, "lag\t%s\n", st.Lag().Round(time.Millisecond))
	if cp.EventTime.Valid {
		fmt.Fprintf(w, "last event\t%s\n", cp.EventTime.Time.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "saved\t%s ago\n", st.Now.Sub(cp.UpdatedAt).Round(time.Millisecond))
	fmt.Fprintf(w, "leader\t%s (epoch %d)\n", cp.Leader, cp.Epoch)
	fmt.Fprintf(w, "events applied\t%d in %d batches\n", cp.EventsApplied, cp.Batches)
	if cp.BootstrappedAt.Valid {
		fmt.Fprintf(w, "bootstrapped\t%s\n", cp.BootstrappedAt.Time.Format(time.RFC3339))
	}
	kinds := make([]string, 0, len(st.Anomalies))
	var total int64
	for k, n := range st.Anomalies {
		kinds = append(kinds, k)
		total += n
	}
	sort.Strings(kinds)
	for _, rt := range st.Shards {
		fmt.Fprintf(w, "%s\t%s (%s)\n", rt.Role, words.Count(len(rt.Tables), "shard"), rt.Written)
	}
	if st.ShardsError != "" {
		fmt.Fprintf(w, "shards\t%s\n", st.ShardsError)
	}
	fmt.Fprintf(w, "anomalies\t%d\n", total)
	for _, k := range kinds {
		note := ""
		if k == inventory.AnomalyUndecodableRow {
			note = " (rows the mapping cannot decode, counted nowhere: table, key and column in cdc_anomaly.detail)"
		}
		fmt.Fprintf(w, "  %s\t%d%s\n", k, st.Anomalies[k], note)
	}
	hooks := fmt.Sprintf("%d pending, %d delivered, %d dropped", st.Webhooks["pending"], st.Webhooks["delivered"], st.Webhooks["dropped"])
	if st.Webhooks["pending"] > 0 {
		hooks += fmt.Sprintf(" (oldest pending written %s ago)", st.Now.Sub(st.OldestPending).Round(time.Second))
	}
	fmt.Fprintf(w, "webhook outbox\t%s\n", hooks)
	printEventSinks(w, st)
	w.Flush()
	printRecentAnomalies(stdout, st.Recent)
}

// printEventSinks names the failing webhook events' last error and each
// stream sink's position, a failing sink with its last error.
func printEventSinks(w io.Writer, st inventory.Status) {
	if st.WebhookError != "" {
		fmt.Fprintf(w, "  failing\t%d events, the newest: %s\n", st.Webhooks["failing"], st.WebhookError)
	}
	for _, s := range st.EventSinks {
		line := fmt.Sprintf("position %d, %d delivered, %d dropped", s.Position, s.Delivered, s.Dropped)
		if s.FailedRounds > 0 {
			line += fmt.Sprintf("; FAILING, %s: %s", words.Count(int(s.FailedRounds), "failed round"), s.LastError)
		}
		fmt.Fprintf(w, "event sink %s\t%s\n", s.Name, line)
	}
}

// printPairs prints the derived states per template and channel; with
// sources (summed over several), each pair's sources in a last column.
func printPairs(stdout io.Writer, ps []inventory.PairStatus, sources []string) error {
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	head := "template\tchannel\tquota\tclaimable\theld\tused\texpired\treturned\treleased\tfrozen\t"
	if sources != nil {
		head += "sources\t"
	}
	fmt.Fprintln(w, head)
	for i, p := range ps {
		quota, claimable := "-", "-"
		if p.HasQuota {
			quota, claimable = fmt.Sprint(p.Quota), fmt.Sprint(p.Claimable())
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t", p.Template, view.Labelled(p.Channel, p.Label), quota, claimable,
			p.Held, p.Used, expiredText(p.Expired, p.PastEnd), p.Returned, p.Released, p.Frozen())
		if sources != nil {
			fmt.Fprintf(w, "%s\t", sources[i])
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

// printChannels prints the template's channels, as a table or as the JSON
// []quota.ChannelView of GET /v1/templates/{id}/channels.
func printChannels(ctx context.Context, db *sql.DB, template int64, asJSON bool, stdout io.Writer) error {
	cs, err := quota.Channels(ctx, db, template)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, cs)
	}
	fmt.Fprintf(stdout, "template %d (counts as of the cdc's checkpoint)\n\n", template)
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "channel\tquota\tclaimed\tclaimable\theld\tused\texpired\treleased\tredemption rate\tlast transfer")
	for _, c := range cs {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", c.Name, c.Quota, c.Claimed, c.Claimable,
			c.Held, c.Used, c.Expired, c.Released, rateText(c.RedemptionRate), transferText(c.Name, c.LastTransfer))
	}
	return w.Flush()
}

func rateText(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", *r*100)
}

// transferText is a transfer as seen by one of its channels: "+100 from
// sms 2026-11-29T14:00Z" for the receiver, "-100 to app ..." for the giver.
func transferText(channel string, t *quota.Transfer) string {
	if t == nil {
		return "-"
	}
	at := t.At.UTC().Format("2006-01-02T15:04Z")
	if t.To == channel {
		return fmt.Sprintf("+%d from %s %s", t.Amount, t.From, at)
	}
	return fmt.Sprintf("-%d to %s %s", t.Amount, t.To, at)
}
