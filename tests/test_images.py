"""Task images (issue 37): a fixture's commands see an image's /usr and /etc instead of the host's,
one built from Debian packages (cached) and one a rootfs directory of the user's own; bad image
specs are refused by field."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from verifirst.core.errors import InputError
from verifirst.verifiers.bash import fixtures, images


def _sandbox():
    from verifirst.verifiers.bash.sandbox import Sandbox

    try:
        return Sandbox(timeout_s=20)
    except Exception as e:  # no user namespaces here
        pytest.skip(f"sandbox unavailable: {e}")


def _tiny_rootfs(root: Path) -> Path:
    """A user's own image: bash, cat and ls with their libraries, and an /etc that says what it is."""
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text('ID=tiny\nPRETTY_NAME="Tiny test image"\n')
    for name in ("bin", "sbin", "lib", "lib64"):
        (root / name).symlink_to(f"usr/{name}")
    for tool in ("bash", "cat", "ls"):
        src = Path(shutil.which(tool)).resolve()
        needed = [src] + [Path(p) for p in subprocess.run(["ldd", str(src)], capture_output=True, text=True).stdout.split()
                          if p.startswith("/")]
        for f in needed:
            rel = f.relative_to("/")
            rel = Path("usr") / rel if rel.parts[0] in ("bin", "lib", "lib64") else rel
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            if not (root / rel).exists():
                shutil.copy2(f.resolve(), root / rel)
    (root / "usr" / "sbin").mkdir(exist_ok=True)
    (root / "usr" / "bin" / "sh").symlink_to("bash")
    return root


def test_a_rootfs_directory_of_the_users_own_is_the_tasks_usr_and_etc(tmp_path):
    root = _tiny_rootfs(tmp_path / "tiny")
    os.chmod(tmp_path, 0o755)
    fx = fixtures.custom("tiny-image-issue37", {"/work/a.txt": "a\n"}, image={"rootfs": str(root)})
    r = _sandbox().run("cat /etc/os-release; ls /usr/bin; cat /work/a.txt; command -v python3 || echo none", fx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == ["ID=tiny", 'PRETTY_NAME="Tiny test image"', "bash", "cat", "ls", "sh", "a", "none"]
    assert fixtures.custom("tiny-image-copy", {}, base="tiny-image-issue37").image == fx.image  # the base's image


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="mmdebstrap is not installed (make test installs it)")
def test_an_image_built_from_debian_packages_has_the_tools_the_host_lacks():
    """`rename` is in the benchmark's image, not on this host: a task that needs it runs in an image
    built from Debian packages (once per machine; cached after)."""
    spec = {"debian": {"packages": ["rename"]}}
    root = images.rootfs(images.check_image(spec))
    assert os.path.lexists(root / "usr" / "bin" / "rename") and not os.path.lexists("/usr/bin/rename")
    assert any(i["recipe"]["packages"] == ["rename"] for i in images.built_images())
    fx = fixtures.custom("debian-rename-issue37", {"/data/a_1.txt": "1", "/data/a_2.txt": "2"}, image=spec)
    r = _sandbox().run("cd /data && rename 's/a_/b_/' *.txt && ls; dpkg-query -W rename >/dev/null 2>&1; "
                       "grep -c . /etc/debian_version", fx)
    assert r.exit_code == 0 and r.stdout.splitlines()[:2] == ["b_1.txt", "b_2.txt"], r.stderr


def test_bad_image_specs_name_the_field(tmp_path):
    for spec, field in [({"docker": "x"}, "image"), ({"rootfs": "relative/dir"}, "image.rootfs"),
                        ({"rootfs": str(tmp_path)}, "image.rootfs"),
                        ({"debian": {"packages": ["Bad Name"]}}, "image.debian.packages"),
                        ({"debian": {"suite": "../x"}}, "image.debian.suite"),
                        ({"debian": {"mirror": "http://x"}}, "image.debian")]:
        with pytest.raises(InputError) as e:
            images.check_image(spec)
        assert e.value.field == field, (spec, e.value.field)
