//go:build !linux

package child

// start does nothing: only Linux has child subreapers (see Reaper).
func (r *Reaper) start() error { return nil }

// sweep does nothing outside Linux.
func (r *Reaper) sweep() {}
