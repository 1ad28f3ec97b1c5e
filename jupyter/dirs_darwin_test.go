package jupyter

func dataDirCases(home string) []dataDirCase {
	return []dataDirCase{
		{"XDG_DATA_HOME is not read", map[string]string{"XDG_DATA_HOME": "/x"}, home + "/Library/Jupyter", home + "/Library/Jupyter/runtime"},
		{"default", nil, home + "/Library/Jupyter", home + "/Library/Jupyter/runtime"},
	}
}
