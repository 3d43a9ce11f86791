package inventory

import "github.com/couponlink/couponlink/canal"

// Mapping is a legacy shop's mapping file as read: its tables, columns,
// states and sources. The read model takes it from the binlog package,
// which decodes the shop's rows with it, so that the API reaches a legacy
// shop through inventory only.
type Mapping = canal.Mapping
