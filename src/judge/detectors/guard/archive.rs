//! Archivers and compressors, by what they do with each word: a backup reads its inputs and
//! writes only the archive; an extraction writes into its directory; a few modes delete what
//! they were given (`tar --remove-files`, `zip -m`, `gzip` without `-k`). The guard judges the
//! words each writes or removes and leaves the ones it only reads.

use super::paths::Op;

/// The words `prog` with `args` writes (`Op::Write`) or removes or writes into
/// (`Op::Remove`), or `None` when `prog` is not an archiver.
pub fn effects(prog: &str, args: &[String]) -> Option<Vec<(String, Op)>> {
    Some(match prog {
        "tar" | "bsdtar" | "gtar" => tar(args),
        "zip" => zip(args),
        "unzip" => unzip(args),
        "7z" | "7za" | "7zz" => seven_zip(args),
        "gzip" | "gunzip" | "bzip2" | "bunzip2" | "xz" | "unxz" | "zstd" | "unzstd" | "lz4"
        | "lzma" | "compress" | "pigz" => compressor(prog, args),
        _ => return None,
    })
}

/// tar: the mode letter decides. Creating (`c`, `r`, `u`, `A`) reads the members (from `-C`'s
/// directory too) and writes the archive; extracting (`x`) writes into `-C`'s directory (the
/// working directory's members cannot be known from the words); listing (`t`, `d`) writes
/// nothing. `--remove-files` deletes the members once archived.
fn tar(args: &[String]) -> Vec<(String, Op)> {
    let mut mode = None;
    let mut archive: Option<String> = None;
    let mut dirs: Vec<String> = Vec::new();
    let mut members: Vec<String> = Vec::new();
    let mut removes = false;
    let mut it = args.iter().enumerate().peekable();
    while let Some((i, a)) = it.next() {
        let value = |it: &mut std::iter::Peekable<_>| -> Option<String> {
            it.next().map(|(_, v): (usize, &String)| v.clone())
        };
        match a.as_str() {
            "-C" | "--directory" => dirs.extend(value(&mut it)),
            "-f" | "--file" => archive = value(&mut it),
            "--remove-files" => removes = true,
            "-c" | "--create" | "-r" | "--append" | "-u" | "--update" | "-A" | "--catenate"
            | "--concatenate" => mode = Some('c'),
            "-x" | "--extract" | "--get" => mode = Some('x'),
            "-t" | "--list" | "-d" | "--diff" | "--compare" => mode = Some('t'),
            s if s.starts_with("--directory=") => dirs.push(s["--directory=".len()..].into()),
            s if s.starts_with("--file=") => archive = Some(s["--file=".len()..].into()),
            s if s.starts_with("-C") => dirs.push(s[2..].into()),
            s if s.starts_with("--") => {}
            // Bundled letters: `czf ARCHIVE`, `-xzf ARCHIVE`; `f` takes the next word.
            s if (i == 0 && !s.starts_with('-')) || (s.starts_with('-') && s.len() > 1) => {
                let letters = s.trim_start_matches('-');
                for c in letters.chars() {
                    match c {
                        'c' | 'r' | 'u' | 'A' => mode = Some('c'),
                        'x' => mode = Some('x'),
                        't' | 'd' => mode = Some('t'),
                        'f' => archive = value(&mut it),
                        'C' => dirs.extend(value(&mut it)),
                        _ => {}
                    }
                }
            }
            s => members.push(s.to_string()),
        }
    }
    let mut out = Vec::new();
    match mode {
        Some('c') => {
            out.extend(archive.map(|a| (a, Op::Write)));
            if removes {
                out.extend(members.into_iter().map(|m| (m, Op::Remove)));
            }
        }
        Some('t') => {}
        // Extracting, or a mode not given: whatever it writes lands in its directories.
        _ => out.extend(dirs.into_iter().map(|d| (d, Op::Remove))),
    }
    out
}

/// zip ARCHIVE FILES…: reads the files, writes the archive (and `--out`'s); `-m` moves the files
/// into it, deleting them.
fn zip(args: &[String]) -> Vec<(String, Op)> {
    let mut out = Vec::new();
    let mut moves = false;
    let mut operands = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-O" | "--out" => out.extend(it.next().map(|o| (o.clone(), Op::Write))),
            "-b" | "--temp-path" | "-n" | "--suffixes" | "-P" | "--password" | "-x" | "-i"
            | "--exclude" | "--include" | "-t" | "-tt" => {
                it.next();
            }
            "-m" | "--move" => moves = true,
            s if s.starts_with("--") => {}
            s if s.starts_with('-') && s.len() > 1 => moves |= s[1..].contains('m'),
            s => operands.push(s.to_string()),
        }
    }
    let mut operands = operands.into_iter();
    out.extend(operands.next().map(|a| (a, Op::Write)));
    if moves {
        out.extend(operands.map(|m| (m, Op::Remove)));
    }
    out
}

/// unzip ARCHIVE: writes into `-d`'s directory (the working directory's members cannot be known
/// from the words); `-l`, `-t`, `-v`, `-p`, `-Z` only look or print.
fn unzip(args: &[String]) -> Vec<(String, Op)> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-d" {
            out.extend(it.next().map(|d| (d.clone(), Op::Remove)));
        } else if let Some(d) = a.strip_prefix("-d").filter(|d| !d.is_empty()) {
            out.push((d.to_string(), Op::Remove));
        }
    }
    out
}

/// 7z COMMAND ARCHIVE FILES…: `a`/`u` read the files and write the archive; `x`/`e` write into
/// `-o`'s directory; `d` rewrites the archive; `l`/`t` only look.
fn seven_zip(args: &[String]) -> Vec<(String, Op)> {
    let operands: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let outdir = args
        .iter()
        .filter_map(|a| a.strip_prefix("-o").filter(|d| !d.is_empty()))
        .map(|d| (d.to_string(), Op::Remove));
    match operands.first().map(|c| c.as_str()) {
        Some("a" | "u" | "d" | "rn") => operands
            .get(1)
            .map(|a| vec![((*a).clone(), Op::Write)])
            .unwrap_or_default(),
        Some("l" | "t" | "h" | "i") => Vec::new(),
        _ => outdir.collect(),
    }
}

/// gzip and its like replace each file with its (de)compressed form, deleting it, unless told to
/// keep it or to write to stdout; `-o`/`--output` (zstd, lz4) names what is written.
fn compressor(prog: &str, args: &[String]) -> Vec<(String, Op)> {
    let mut keeps = false;
    let mut out = Vec::new();
    let mut files = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-k" | "--keep" | "-c" | "--stdout" | "--to-stdout" | "-l" | "--list" | "-t"
            | "--test" => keeps = true,
            "-o" | "--output" if matches!(prog, "zstd" | "unzstd" | "lz4") => {
                keeps = true;
                out.extend(it.next().map(|o| (o.clone(), Op::Write)));
            }
            s if s.starts_with("--") => {}
            s if s.starts_with('-') && s.len() > 1 => {
                keeps |= s[1..].contains(['k', 'c', 'l', 't']);
            }
            s => files.push(s.to_string()),
        }
    }
    // zstd and lz4 keep their input unless told to remove it.
    let removes =
        !keeps && !matches!(prog, "zstd" | "unzstd" | "lz4") || args.iter().any(|a| a == "--rm");
    if removes {
        out.extend(files.into_iter().map(|f| (f, Op::Remove)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn judged(prog: &str, s: &str) -> Vec<(String, Op)> {
        effects(prog, &words(s)).unwrap()
    }

    #[test]
    fn a_backup_writes_only_its_archive() {
        assert_eq!(
            judged("tar", "czf /tmp/x.tgz -C /h/.local/state loopgate"),
            vec![("/tmp/x.tgz".to_string(), Op::Write)]
        );
        assert_eq!(
            judged("tar", "-xzf x.tgz -C /h/state"),
            vec![("/h/state".to_string(), Op::Remove)]
        );
        assert_eq!(
            judged("tar", "--create --remove-files -f /tmp/x.tar a"),
            vec![
                ("/tmp/x.tar".to_string(), Op::Write),
                ("a".to_string(), Op::Remove)
            ]
        );
        assert_eq!(
            judged("zip", "-qr /tmp/x.zip /h/.claude/settings.json"),
            vec![("/tmp/x.zip".to_string(), Op::Write)]
        );
        assert_eq!(judged("zip", "-qrm /tmp/x.zip a").len(), 2);
        assert!(judged("gzip", "-k a").is_empty());
        assert_eq!(judged("gzip", "a"), vec![("a".to_string(), Op::Remove)]);
        assert!(judged("zstd", "a").is_empty());
    }
}
