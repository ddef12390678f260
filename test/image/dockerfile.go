package image

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Dockerfile is what ParseDockerfile reads from a Dockerfile: its final stage, and the
// `go build` commands of the stages that stage copies from.
type Dockerfile struct {
	// Base is the final stage's FROM image: "gcr.io/distroless/static:nonroot".
	Base string
	// User, Entrypoint and WorkingDir are the final stage's USER ("65532:65532"), ENTRYPOINT
	// (exec form, ["/manager"]) and WORKDIR ("/"); empty when absent.
	User       string
	Entrypoint []string
	WorkingDir string
	// Binaries maps each path a final-stage `COPY --from=STAGE SRC DST` writes ("/manager")
	// to the go build in STAGE whose -o is SRC.
	Binaries map[string]GoBuild
	// Unmodelled lists the final stage's instructions that neither this type nor the
	// operator image models (ENV, LABEL, EXPOSE, a COPY from the build context or with
	// --chown/--chmod, a second USER...), verbatim.
	Unmodelled []string
}

// GoBuild is one `go build` command of a Dockerfile RUN line, or of BuildCommand.
type GoBuild struct {
	// Env are the NAME=value assignments before `go`: ["CGO_ENABLED=0", "GOOS=linux"].
	Env []string
	// Flags are the build flags other than -o, as go reads them, one element per flag with
	// its value joined by "=": -ldflags="-s -w" and -ldflags "-s -w" both read "-ldflags=-s -w".
	Flags []string
	// Output is -o's value ("/out/manager"); Package the one package built ("./cmd/manager").
	Output  string
	Package string
}

// ParseDockerfile reads a Dockerfile's text (line continuations, comments, multi-stage
// builds; JSON ENTRYPOINT only). A final-stage COPY --from a stage that builds no such
// output, or a go build of more or fewer than one package, is an error.
func ParseDockerfile(text string) (*Dockerfile, error) {
	type instr struct{ keyword, args, line string }
	type stage struct {
		name, base string
		instrs     []instr
	}
	var stages []*stage
	var logical []string
	cur := ""
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "#") || line == "" { // also inside a continuation, as BuildKit reads it
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		logical = append(logical, cur+line)
		cur = ""
	}
	if strings.TrimSpace(cur) != "" {
		logical = append(logical, cur)
	}
	for _, l := range logical {
		keyword, args, _ := strings.Cut(strings.TrimSpace(l), " ")
		keyword, args = strings.ToUpper(keyword), strings.TrimSpace(args)
		if keyword == "FROM" {
			f := strings.Fields(args)
			st := &stage{}
			for len(f) > 0 && strings.HasPrefix(f[0], "--") { // --platform=...
				f = f[1:]
			}
			if len(f) == 0 {
				return nil, fmt.Errorf("FROM without an image: %q", l)
			}
			st.base = f[0]
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if keyword == "ARG" {
				continue
			}
			return nil, fmt.Errorf("%s before the first FROM", keyword)
		}
		st := stages[len(stages)-1]
		st.instrs = append(st.instrs, instr{keyword, args, l})
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("no FROM")
	}
	stageByName := func(ref string) *stage {
		for i, s := range stages[:len(stages)-1] {
			if s.name == ref || fmt.Sprint(i) == ref {
				return s
			}
		}
		return nil
	}
	buildsOf := func(s *stage) ([]GoBuild, error) {
		var out []GoBuild
		for _, in := range s.instrs {
			if in.keyword != "RUN" {
				continue
			}
			cmds, err := shellCommands(in.args)
			if err != nil {
				return nil, fmt.Errorf("RUN %s: %w", in.args, err)
			}
			for _, words := range cmds {
				var env []string
				for len(words) > 0 && isAssignment(words[0]) {
					env, words = append(env, words[0]), words[1:]
				}
				if len(words) < 2 || words[0] != "go" || words[1] != "build" {
					continue
				}
				gb, err := parseGoBuild(words[2:])
				if err != nil {
					return nil, fmt.Errorf("RUN %s: %w", in.args, err)
				}
				if len(gb.pkgs) != 1 {
					return nil, fmt.Errorf("RUN %s: a go build of %d packages; want one per command", in.args, len(gb.pkgs))
				}
				out = append(out, GoBuild{Env: env, Flags: gb.flags, Output: gb.output, Package: gb.pkgs[0]})
			}
		}
		return out, nil
	}

	final := stages[len(stages)-1]
	d := &Dockerfile{Base: final.base, Binaries: map[string]GoBuild{}}
	seen := map[string]bool{}
	for _, in := range final.instrs {
		switch in.keyword {
		case "USER", "ENTRYPOINT", "WORKDIR":
			if seen[in.keyword] {
				d.Unmodelled = append(d.Unmodelled, in.line)
				continue
			}
			seen[in.keyword] = true
		}
		switch in.keyword {
		case "USER":
			d.User = in.args
		case "WORKDIR":
			d.WorkingDir = in.args
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.args), &d.Entrypoint); err != nil {
				return nil, fmt.Errorf("ENTRYPOINT %s: only the exec (JSON) form is read: %w", in.args, err)
			}
		case "COPY":
			words := strings.Fields(in.args)
			from := ""
			modelled := true
			for len(words) > 0 && strings.HasPrefix(words[0], "--") {
				if v, ok := strings.CutPrefix(words[0], "--from="); ok {
					from = v
				} else {
					modelled = false // --chown, --chmod, --link...
				}
				words = words[1:]
			}
			src := stageByName(from)
			if !modelled || src == nil || len(words) < 2 {
				d.Unmodelled = append(d.Unmodelled, in.line)
				continue
			}
			builds, err := buildsOf(src)
			if err != nil {
				return nil, err
			}
			srcs, dst := words[:len(words)-1], words[len(words)-1]
			for _, s := range srcs {
				i := slices.IndexFunc(builds, func(b GoBuild) bool { return path.Clean(b.Output) == path.Clean(s) })
				if i < 0 {
					return nil, fmt.Errorf("%s: stage %s has no go build -o %s", in.line, from, s)
				}
				target := dst
				if len(srcs) > 1 || strings.HasSuffix(dst, "/") {
					target = path.Join(dst, path.Base(s))
				}
				d.Binaries[path.Clean(target)] = builds[i]
			}
		default:
			d.Unmodelled = append(d.Unmodelled, in.line)
		}
	}
	return d, nil
}

// OperatorDrift compares a Dockerfile's text with OperatorSpec and BuildCommand for
// OperatorPackages: the base image (DistrolessBase), USER, ENTRYPOINT, WORKDIR, the binary
// paths and the package each is built from, each build's flags and environment, the
// binaries' owner and mode (a COPY without --chown gives root:root and keeps go build's
// 0755), and final-stage instructions not modelled. It returns one sentence per difference,
// none when the two agree; an error when the text does not parse.
func OperatorDrift(dockerfile string) ([]string, error) {
	d, err := ParseDockerfile(dockerfile)
	if err != nil {
		return nil, err
	}
	const binDir = "/bin-dir"
	return drift(d, OperatorSpec(binDir), binDir, BuildCommand(context.Background(), "/repo", binDir, OperatorPackages...)), nil
}

// drift compares d with spec, whose binaries come from binDir, built by cmd.
func drift(d *Dockerfile, spec Spec, binDir string, cmd *exec.Cmd) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if d.Base != DistrolessBase {
		add("base image: the Dockerfile's final stage is FROM %s, but the image's base files model %s", d.Base, DistrolessBase)
	}
	if d.User != spec.User {
		add("USER: the Dockerfile says %q, OperatorSpec %q", d.User, spec.User)
	}
	if !slices.Equal(d.Entrypoint, spec.Entrypoint) {
		add("ENTRYPOINT: the Dockerfile says %q, OperatorSpec %q", d.Entrypoint, spec.Entrypoint)
	}
	if d.WorkingDir != spec.WorkingDir {
		add("WORKDIR: the Dockerfile says %q, OperatorSpec %q", d.WorkingDir, spec.WorkingDir)
	}
	for _, l := range d.Unmodelled {
		add("final stage: %q is not modelled by OperatorSpec", l)
	}

	// Ours: go build's arguments, and which image path ships which package's binary.
	if len(cmd.Args) < 2 || cmd.Args[1] != "build" {
		add("BuildCommand runs %q, not go build", cmd.Args)
		return out
	}
	ours, err := parseGoBuild(cmd.Args[2:])
	if err != nil {
		add("BuildCommand: %v", err)
		return out
	}
	pkgOf := map[string]string{} // binary file name -> package
	for _, p := range ours.pkgs {
		pkgOf[path.Base(p)] = p
	}
	shipped := map[string]File{} // image path -> file from binDir
	for _, f := range spec.Files {
		if f.SourcePath != "" && filepath.Dir(f.SourcePath) == filepath.Clean(binDir) {
			shipped[f.Path] = f
		}
	}
	paths := map[string]bool{}
	for p := range d.Binaries {
		paths[p] = true
	}
	for p := range shipped {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	for _, p := range sorted {
		theirs, inDockerfile := d.Binaries[p]
		f, inSpec := shipped[p]
		switch {
		case !inSpec:
			add("%s: the Dockerfile ships it (built from %s), OperatorSpec does not", p, theirs.Package)
			continue
		case !inDockerfile:
			add("%s: OperatorSpec ships it, the Dockerfile does not", p)
			continue
		}
		pkg, built := pkgOf[filepath.Base(f.SourcePath)]
		if !built {
			add("%s: OperatorSpec ships %s, which BuildCommand does not build", p, f.SourcePath)
			continue
		}
		if path.Clean(pkg) != path.Clean(theirs.Package) {
			add("%s: the Dockerfile builds it from %s, BuildCommand from %s", p, theirs.Package, pkg)
		}
		if !slices.Equal(theirs.Flags, ours.flags) {
			add("%s: the Dockerfile builds it with flags %q, BuildCommand with %q", p, theirs.Flags, ours.flags)
		}
		for _, kv := range theirs.Env {
			k, _, _ := strings.Cut(kv, "=")
			if got := lastAssignment(cmd.Env, k); got != kv {
				add("%s: the Dockerfile builds it with %s, BuildCommand with %q", p, kv, got)
			}
		}
		if f.Uid != 0 || f.Gid != 0 || tarMode(f.Mode) != 0o755 {
			add("%s: OperatorSpec ships it as %d:%d mode %o; the Dockerfile's COPY gives 0:0 mode 755", p, f.Uid, f.Gid, tarMode(f.Mode))
		}
	}
	return out
}

func lastAssignment(env []string, name string) string {
	got := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			got = kv
		}
	}
	return got
}

func isAssignment(w string) bool {
	k, _, ok := strings.Cut(w, "=")
	if !ok || k == "" {
		return false
	}
	for i, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

type goBuildArgs struct {
	flags  []string
	output string
	pkgs   []string
}

// valueFlags are go build's flags that take a value (the rest are booleans).
var valueFlags = map[string]bool{
	"-o": true, "-ldflags": true, "-gcflags": true, "-asmflags": true, "-gccgoflags": true,
	"-tags": true, "-mod": true, "-modfile": true, "-p": true, "-pkgdir": true,
	"-buildmode": true, "-compiler": true, "-installsuffix": true, "-overlay": true,
	"-pgo": true, "-coverpkg": true, "-covermode": true, "-toolexec": true, "-C": true,
}

// parseGoBuild reads go build's arguments after "build".
func parseGoBuild(args []string) (goBuildArgs, error) {
	var g goBuildArgs
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			g.pkgs = append(g.pkgs, a)
			continue
		}
		flag := "-" + strings.TrimLeft(a, "-") // --ldflags is -ldflags to go
		name, value, hasValue := strings.Cut(flag, "=")
		if valueFlags[name] && !hasValue {
			if i+1 >= len(args) {
				return g, fmt.Errorf("go build %s: no value", name)
			}
			i++
			value, hasValue = args[i], true
		}
		if name == "-o" {
			g.output = value
			continue
		}
		if hasValue {
			g.flags = append(g.flags, name+"="+value)
		} else {
			g.flags = append(g.flags, name)
		}
	}
	return g, nil
}

// shellCommands splits a RUN line (shell form) into simple commands at unquoted &&, ||, ;
// and |, and each into words, removing quotes as sh does (no expansion: a $ stays as is).
func shellCommands(s string) ([][]string, error) {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			endWord()
		case c == '&' && i+1 < len(s) && s[i+1] == '&', c == '|' && i+1 < len(s) && s[i+1] == '|':
			endCmd()
			i++
		case c == ';' || c == '|':
			endCmd()
		case c == '\\' && i+1 < len(s):
			inWord = true
			i++
			w.WriteByte(s[i])
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated '")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \"")
			}
		default:
			inWord = true
			w.WriteByte(c)
		}
	}
	endCmd()
	return cmds, nil
}
