package auth

// symlinkError is openPrivate's refusal of a symbolic link.
type symlinkError struct{ msg string }

func (e symlinkError) Error() string { return e.msg }
