package canal

// QuoteTable quotes a mapped table name for SQL, with its schema when the
// mapping names one: `legacydb`.`t_user_coupon`.
func (m *Mapping) QuoteTable(table string) string { return m.quoteTable(table) }
