package bridge

import (
	"fmt"
	"os"
)

// openAuditFile opens the audit file for appending, creating it if it does
// not exist; it refuses a path that is a link or not a regular file (the
// check before the open is the best Windows offers without following
// reparse points). File modes do not apply (wide is always false).
func openAuditFile(path string) (f *os.File, wide bool, err error) {
	if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() {
		return nil, false, fmt.Errorf("%s is not a regular file (%s): the bridge writes its audit records only to a regular file of its own", path, st.Mode().Type())
	}
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	return f, false, err
}
