package inventory

// SetIDChunk makes DuplicateCouponIDs read n ids at a time.
func SetIDChunk(s *Queries, n int) { s.idChunk = n }
