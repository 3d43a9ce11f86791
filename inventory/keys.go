package inventory

import (
	"fmt"
	"strconv"

	"github.com/couponlink/couponlink/canal"
)

// Keys names couponlink's Redis keys. The template id is a hash tag, so
// that a template's keys live in one Redis Cluster slot.
//
//	<prefix>stock:{<template>}:<channel>   claimable of one channel bucket
//	<prefix>stock:{<template>}             claimable of the template
//	<prefix>stamp:{<template>}             hash: field per key -> binlog stamp of its value
//	<prefix>claimed:{<template>}           set: the users who hold the template's per-user limit
//	<prefix>epoch[:<owner>]                present while Redis holds a full copy
//
// Owner names the cdc whose full copy an epoch marker stands for, when
// several cdcs share a prefix (one per primary, each with its own
// templates): each must see its own marker gone after a flush.
type Keys struct{ Prefix, Owner string }

// Stock is the key of one channel bucket's claimable count.
func (k Keys) Stock(template int64, channel string) string {
	return k.Prefix + "stock:{" + strconv.FormatInt(template, 10) + "}:" + channel
}

// TemplateStock is the key of a template's claimable count.
func (k Keys) TemplateStock(template int64) string {
	return k.Prefix + "stock:{" + strconv.FormatInt(template, 10) + "}"
}

// Claimed is the set of the users who hold as many coupons of the
// template as its per-user limit allows (the "already claimed" marker a
// front end reads before it sends a claim).
func (k Keys) Claimed(template int64) string {
	return k.Prefix + "claimed:{" + strconv.FormatInt(template, 10) + "}"
}

// Stamps is the hash of a template's value stamps.
func (k Keys) Stamps(template int64) string {
	return k.Prefix + "stamp:{" + strconv.FormatInt(template, 10) + "}"
}

// Epoch marks a Redis that holds couponlink's full copy (of the Owner's
// templates); a flush removes it.
func (k Keys) Epoch() string {
	if k.Owner == "" {
		return k.Prefix + "epoch"
	}
	return k.Prefix + "epoch:" + k.Owner
}

// Stamp orders binlog positions of one server: file number and offset.
func Stamp(p canal.Position) int64 {
	var n int64
	for i := len(p.File) - 1; i >= 0; i-- {
		if p.File[i] == '.' {
			n, _ = strconv.ParseInt(p.File[i+1:], 10, 64)
			break
		}
	}
	return n<<32 | int64(p.Pos)
}

// RedisMode says who writes the Redis stock keys.
type RedisMode string

// The Redis modes. The empty mode is the default of the schema: owner
// when the mapping has channel quotas, else corrector.
const (
	RedisOwner     RedisMode = "owner"     // couponlink alone writes the stock keys, from MySQL
	RedisCorrector RedisMode = "corrector" // a legacy front end DECRs them; only the reconciler corrects
	RedisOff       RedisMode = "off"
)

// Validate says whether m is one of the modes (or empty: the default).
func (m RedisMode) Validate() error {
	switch m {
	case "", RedisOwner, RedisCorrector, RedisOff:
		return nil
	}
	return fmt.Errorf("unknown Redis mode %q (want owner, corrector or off)", string(m))
}

// ParseRedisMode reads a mode as given on the command line ("" is the
// schema's default).
func ParseRedisMode(s string) (RedisMode, error) {
	m := RedisMode(s)
	return m, m.Validate()
}

// DefaultRedisMode is a schema's mode: owner when the mapping has channel
// quotas (couponlink's keys follow them), else corrector.
func DefaultRedisMode(m *canal.Mapping) RedisMode {
	if m.ChannelQuota == nil {
		return RedisCorrector
	}
	return RedisOwner
}
