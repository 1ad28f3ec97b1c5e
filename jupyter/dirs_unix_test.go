//go:build unix && !darwin

package jupyter

func dataDirCases(home string) []dataDirCase {
	return []dataDirCase{
		{"XDG_DATA_HOME", map[string]string{"XDG_DATA_HOME": "/x"}, "/x/jupyter", "/x/jupyter/runtime"},
		{"default", nil, home + "/.local/share/jupyter", home + "/.local/share/jupyter/runtime"},
	}
}
