// Package mysql holds couponlink's MySQL/MariaDB grants (grants.sql): the
// users couponlink_cdc, couponlink_api and couponlink_reconcile with least
// privileges. Its test applies the grants to a fresh database on the private
// MariaDB and runs the real cdc, write path and reconciler as those users,
// proving the grants are enough, and that they are not too much.
//
// Its other tests keep the rest of deploy/ honest without a Docker engine or
// a cluster: every YAML file under deploy/compose and deploy/k8s parses,
// every COUPONLINK_* variable they (and deploy/systemd) set is one couponlink
// reads, the k8s probes and scrape annotations name the ports the processes
// listen on, and prometheus.yml scrapes the jobs the alerts name.
package mysql
