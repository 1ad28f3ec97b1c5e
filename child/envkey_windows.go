package child

import "strings"

// EnvKey is the form in which the system compares an environment
// variable's name: Windows ignores case ("Path" is PATH).
func EnvKey(name string) string { return strings.ToUpper(name) }
