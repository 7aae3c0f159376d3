"""Where an eval's figures came from: the commit read from a checkout's files (a worktree's
`.git` file followed, a packed ref found), unknown outside one, and the command as typed."""

from __future__ import annotations

from pathlib import Path

from panel_cli.eval.provenance import command_line, python_version, source_commit, started_at

SHA = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"


def test_a_branch_checked_out_reads_its_ref(tmp_path: Path):
    (tmp_path / ".git" / "refs" / "heads").mkdir(parents=True)
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / ".git" / "refs" / "heads" / "main").write_text(SHA + "\n")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    assert source_commit(tmp_path / "src" / "pkg") == SHA


def test_a_worktree_follows_its_git_file_to_the_shared_packed_refs(tmp_path: Path):
    common = tmp_path / "main" / ".git"
    own = common / "worktrees" / "calib"
    own.mkdir(parents=True)
    (common / "packed-refs").write_text(f"# pack-refs with: peeled\n{OTHER} refs/heads/main\n{SHA} refs/heads/calib\n")
    (own / "HEAD").write_text("ref: refs/heads/calib\n")
    (own / "commondir").write_text("../..\n")
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {own}\n")
    assert source_commit(tree) == SHA


def test_a_detached_head_is_its_commit_and_no_checkout_is_unknown(tmp_path: Path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / ".git" / "HEAD").write_text(SHA)
    assert source_commit(tmp_path / "repo") == SHA
    (tmp_path / "bare").mkdir()
    assert source_commit(tmp_path / "bare") is None, "pytest's temporary folders are in no checkout"
    broken = tmp_path / "broken"
    (broken / ".git").mkdir(parents=True)
    (broken / ".git" / "HEAD").write_text("ref: ../../etc/passwd\n")
    assert source_commit(broken) is None


def test_the_command_and_the_moment():
    assert command_line(["/usr/lib/python3/site-packages/panel_cli/__main__.py", "eval", "p.yaml"]) == [
        "panel",
        "eval",
        "p.yaml",
    ]
    assert started_at().endswith("Z") and "T" in started_at()
    assert python_version()[0].isdigit()
