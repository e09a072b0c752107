"""The pool's safety rules (issue 22) hold from Python as they hold on the command line: a
failure past the fault tolerance is refused without ``force=True``, create does not overwrite
files that are not raidforge members, assemble does not overwrite another pool's descriptor,
replace refuses used files and ``raidforge.wipe`` blanks a member, a member back unchanged
rejoins with ``re_add``, and members are named 1 or "m1" as ``status()`` labels them. Each
case is also run through the CLI, and both must agree."""

from __future__ import annotations

import os
import shutil

import pytest

import raidforge
from raidforge import RaidforgeError


def pattern(n: int, seed: int) -> bytes:
    return bytes((i * 31 + seed * 7 + i // 4099) % 251 for i in range(n))


def snapshot(d):
    """Every file of `d` with its bytes (what a refusal must leave as it was)."""
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def raid5(d, n=3, **kw):
    members = [d / f"m{i}.img" for i in range(n)]
    return raidforge.Pool.create(d / "p.json", scheme="raid5", disks=n, members=members,
                                 member_size="4M", **kw)


def test_fail_past_the_fault_tolerance_is_refused_without_force(cli, tmp_path):
    py, sh = tmp_path / "py", tmp_path / "sh"
    py.mkdir()
    sh.mkdir()
    data = pattern(200_000, 1)
    with raid5(py) as p:
        p.write(0, data)
        assert p.fail(1)["fault_tolerance"] == 0
        before = p.status()
        with pytest.raises(RaidforgeError) as e:
            p.fail(0)
        msg = str(e.value)
        assert msg.startswith(
            "failing member 0 would lose data: with m1 failed, some stripes would have too few "
            "members left"
        ), msg
        assert "force=True" in msg and "rebuild first" in msg, msg
        assert "FailOutcome" not in msg and "--force" not in msg, msg
        assert p.status() == before  # nothing was failed
        assert p.read(0, len(data)) == data

        # The CLI refuses the same failure with the same finding, naming its --force.
        cli.json("create", sh / "p.json", "--scheme", "raid5", "--disks", 3,
                 *[a for i in range(3) for a in ("--member", sh / f"m{i}.img")],
                 "--member-size", "4M", "--json")
        assert cli.run("fail", sh / "p.json", "--member", 1).returncode == 0
        shell = cli.error("fail", sh / "p.json", "--member", 0)
        assert shell.split(" (")[0] == msg.split(" (")[0]
        assert "--force" in shell

        # Replaced but not rebuilt survives nothing either.
        p.replace(1, py / "n1.img")
        assert p.status()["fault_tolerance"] == 0
        with pytest.raises(RaidforgeError, match="m1 replaced but not rebuilt yet.*force=True"):
            p.fail("m2")
        p.rebuild()
        assert p.status()["fault_tolerance"] == 1
        p.fail(0)  # survivable again: no force needed
        assert p.read(0, len(data)) == data
        with pytest.raises(RaidforgeError, match="would lose data"):
            p.fail(2)
        # With force=True it proceeds, and says in a sentence that data is lost (as the CLI
        # does with --force).
        with pytest.raises(RaidforgeError) as e:
            p.fail(2, force=True)
        assert "lost data" in str(e.value) and "FailOutcome" not in str(e.value), e.value
        st = p.status()
        assert st["state"] == "failed", st
        assert sorted(st["failed"]) == [0, 2], st


def test_members_are_named_as_status_labels_them(cli, tmp_path):
    with raid5(tmp_path, n=4) as p:
        assert p.fail("m3")["failed"] == [3]
        with pytest.raises(RaidforgeError) as e:
            p.replace("x3", tmp_path / "n3.img")
        assert "'x3' is not a member index" in str(e.value)
        assert "'x3' is not a member index" in cli.error(
            "replace", tmp_path / "p.json", "--member", "x3", "--with", tmp_path / "n3.img")
        with pytest.raises(RaidforgeError, match="'-1' is not a member index"):
            p.fail(-1)
        with pytest.raises(TypeError, match="member index"):
            p.fail(True)
        assert p.replace("m3", tmp_path / "n3.img")["state"] == "rebuilding"


def test_create_refuses_files_that_hold_data_and_are_not_members(tmp_path):
    (tmp_path / "m0.img").write_bytes(pattern(6 << 20, 2))
    for i in (1, 2):
        with open(tmp_path / f"m{i}.img", "wb") as f:
            f.truncate(6 << 20)
    before = snapshot(tmp_path)
    with pytest.raises(RaidforgeError) as e:
        raid5(tmp_path)
    assert "m0.img" in str(e.value) and "not a raidforge member" in str(e.value), e.value
    assert "--force" in str(e.value)  # the CLI's message; its --force is force= here
    assert snapshot(tmp_path) == before
    with raid5(tmp_path, force=True) as p:
        assert p.status()["state"] == "clean"
    assert os.path.getsize(tmp_path / "m0.img") == 4 << 20


def test_assemble_never_overwrites_another_pools_descriptor(cli, tmp_path):
    data = pattern(50_000, 4)
    with raid5(tmp_path, emulate="hdd:900MB/s:0ms") as p:
        p.write(0, data)
    q = [tmp_path / "q0.img", tmp_path / "q1.img"]
    raidforge.Pool.create(tmp_path / "q.json", scheme="raid1", disks=2, members=q,
                          member_size="4M").close()
    before = snapshot(tmp_path)
    with pytest.raises(RaidforgeError) as e:
        raidforge.Pool.assemble(tmp_path / "p.json", members=q)
    assert "p.json describes another pool" in str(e.value), e.value
    assert str(e.value) == cli.error("assemble", tmp_path / "p.json",
                                     *[a for m in q for a in ("--member", m)])
    assert snapshot(tmp_path) == before
    members = [tmp_path / f"m{i}.img" for i in (2, 0, 1)]
    with raidforge.Pool.assemble(tmp_path / "p.json", members=members) as p:
        st = p.status()
        assert [m["emulate"] for m in st["members"]] == ["hdd:900MB/s:0ms"] * 3, st
        assert p.read(0, len(data)) == data
        assert p.notes == []


def test_replace_refuses_used_files_and_wipe_blanks_a_member(tmp_path):
    data = pattern(200_000, 5)
    q = [tmp_path / "q0.img", tmp_path / "q1.img"]
    raidforge.Pool.create(tmp_path / "q.json", scheme="raid1", disks=2, members=q,
                          member_size="4M").close()
    (tmp_path / "junk.img").write_bytes(pattern(5 << 20, 2))
    with raid5(tmp_path) as p:
        p.write(0, data)
        p.fail(2)
        before = snapshot(tmp_path)
        with pytest.raises(RaidforgeError, match="junk.img.*holds data"):
            p.replace(2, tmp_path / "junk.img")
        with pytest.raises(RaidforgeError, match="raidforge wipe"):
            p.replace(2, q[0])
        with pytest.raises(RaidforgeError, match="nothing to wipe"):
            raidforge.wipe(tmp_path / "junk.img")
        assert snapshot(tmp_path) == before
        uuid = raidforge.Pool.open(tmp_path / "q.json")
        q_uuid = uuid.status()["uuid"]
        uuid.close()
        assert raidforge.wipe(q[0]) == [q_uuid]
        p.replace("m2", q[0])
        assert p.rebuild()["state"] == "clean"
        assert p.verify()["inconsistent"] == []
        assert p.read(0, len(data)) == data


def test_a_member_back_unchanged_rejoins_with_re_add(tmp_path):
    data = pattern(600_000, 9)
    with raid5(tmp_path, n=4, chunk="16K") as p:
        p.write(0, data)
    os.rename(tmp_path / "m1.img", tmp_path / "m1.away")
    with raidforge.Pool.open(tmp_path / "p.json") as p:
        st = p.status()
        assert st["members"][1]["state"] == "failed" and st["members"][1]["failed_why"], st
        assert p.read(0, len(data)) == data
    os.rename(tmp_path / "m1.away", tmp_path / "m1.img")
    with raidforge.Pool.open(tmp_path / "p.json") as p:
        with pytest.raises(RaidforgeError, match="member 0 has not failed"):
            p.re_add(0)
        st = p.re_add("m1")
        assert st["stripes_checked"] > 0, st
        assert st["state"] == "clean" and st["fault_tolerance"] == 1, st
        p.fail(0)  # relies on m1 again
        assert p.read(0, len(data)) == data

    # A member that missed a write while it was away is stale: refused, its file untouched.
    stale = tmp_path / "stale"
    stale.mkdir()
    with raid5(stale, n=4, chunk="16K") as p:  # the write below lands on m2's stripe unit
        p.write(0, data)
    os.rename(stale / "m2.img", stale / "m2.away")
    with raidforge.Pool.open(stale / "p.json") as p:
        p.write(70_000, pattern(5_000, 3))
    shutil.move(stale / "m2.away", stale / "m2.img")
    m2 = (stale / "m2.img").read_bytes()
    with raidforge.Pool.open(stale / "p.json") as p:
        with pytest.raises(RaidforgeError) as e:
            p.re_add(2)
        for word in ("member 2", "stale", "disagree", "raidforge replace", "raidforge rebuild"):
            assert word in str(e.value), e.value
        assert p.status()["members"][2]["state"] == "failed"
    assert (stale / "m2.img").read_bytes() == m2
