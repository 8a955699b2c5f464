package report

import (
	"path/filepath"
	"strconv"
	"strings"
)

// Labels names inputs read from paths for a comparison, by the shortest
// form of each path that tells them apart: the file name without its
// extension, with as many of its folders in front as it takes to differ
// from the others ("run1/ours", "run2/ours"), and without a ".suffix" that
// every name ends with ("ll_t128_i50.ep_bench.out" and
// "ll_t32_i50.ep_bench.out" are "ll_t128_i50" and "ll_t32_i50"). A path
// given twice gets "#2", "#3", ... after its later uses.
func Labels(paths []string) []string {
	parts := make([][]string, len(paths))
	depth := make([]int, len(paths))
	ext := make([]bool, len(paths))
	for i, p := range paths {
		parts[i] = strings.FieldsFunc(filepath.ToSlash(filepath.Clean(p)), func(r rune) bool { return r == '/' })
		depth[i] = 1
	}
	label := func(i int) string {
		ps := parts[i]
		if len(ps) == 0 {
			return ""
		}
		name := ps[len(ps)-1]
		if !ext[i] {
			name = LabelFromPath(name)
		}
		return strings.Join(append(append([]string{}, ps[len(ps)-min(depth[i], len(ps)):len(ps)-1]...), name), "/")
	}
	labels := make([]string, len(paths))
	for {
		for i := range paths {
			labels[i] = label(i)
		}
		grew := false
		for _, group := range alike(labels) {
			// Files of one folder that differ by their extension keep it;
			// others get their folders in front until they differ.
			if !ext[group[0]] {
				with := make([]string, len(group))
				for j, i := range group {
					ext[i] = true
					with[j] = label(i)
				}
				if len(alike(with)) == 0 {
					grew = true
					continue
				}
				for _, i := range group {
					ext[i] = false
				}
			}
			for _, i := range group {
				if depth[i] < len(parts[i]) {
					depth[i]++
					grew = true
				}
			}
		}
		if !grew {
			break
		}
	}
	labels = dropCommonSuffix(labels)
	seen := map[string]int{}
	for i, l := range labels {
		seen[l]++
		if n := seen[l]; n > 1 {
			labels[i] = l + "#" + strconv.Itoa(n)
		}
	}
	return labels
}

// alike groups the indices of equal labels, for each label held more than
// once.
func alike(labels []string) [][]int {
	at := map[string][]int{}
	var order []string
	for i, l := range labels {
		if _, ok := at[l]; !ok {
			order = append(order, l)
		}
		at[l] = append(at[l], i)
	}
	var out [][]int
	for _, l := range order {
		if len(at[l]) > 1 {
			out = append(out, at[l])
		}
	}
	return out
}

// dropCommonSuffix removes, from two labels or more, the ".suffix" of their
// last element that all of them share (which keeps distinct labels
// distinct), as long as no element is left empty.
func dropCommonSuffix(labels []string) []string {
	if len(labels) < 2 {
		return labels
	}
	for {
		var suffix string
		for i, l := range labels {
			dot := strings.LastIndexByte(l, '.')
			if dot <= strings.LastIndexByte(l, '/')+1 {
				return labels
			}
			if i == 0 {
				suffix = l[dot:]
			} else if l[dot:] != suffix {
				return labels
			}
		}
		for i, l := range labels {
			labels[i] = strings.TrimSuffix(l, suffix)
		}
	}
}
