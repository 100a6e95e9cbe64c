"""Finding one's way (issue 41, point 12 and 13): a mistyped flag or setting names the closest,
colour follows NO_COLOR and --color, the effective settings say where each came from, --help is
grouped, shell completion comes from the option table, and --project opts a Claude Code
project's files in."""

from __future__ import annotations

from fakeserver import FakeModel, text


def test_a_mistyped_flag_or_setting_names_the_closest(agi, tmp_path):
    with FakeModel(text("ran")) as server:
        result = agi("--no-stdin", "--shema", "[a:string]", "hi", server=server)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == (
            "agi: unrecognized arguments: --shema; did you mean --schema? (see agi --help)\n"
        )
        result = agi("--no-stdin", "--max-step=3", "hi", server=server)
        assert result.returncode == 2 and "did you mean --max-steps?" in result.stderr
        result = agi("--no-stdin", "--zzzzqqq", "hi", server=server)
        assert result.returncode == 2 and "did you mean" not in result.stderr
        (tmp_path / "config.toml").write_text("max_step = 3\n")
        result = agi("--no-stdin", "hi", server=server)
        assert result.returncode == 2
        assert "unknown setting 'max_step'; did you mean 'max_steps'?" in result.stderr
        (tmp_path / "config.toml").write_text('[providers.mine]\nbase_ur = "http://x/v1"\n')
        result = agi("--no-stdin", "hi", server=server)
        assert result.returncode == 2
        assert "did you mean 'providers.mine.base_url'?" in result.stderr
        assert server.requests == []
