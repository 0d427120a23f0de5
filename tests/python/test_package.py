"""python/dlfs as users install it: `pip install` builds a wheel whose version is the project's
(meson.build's, passed as DLFS_PROJECT_VERSION) and which carries every module of the client and
declares its optional torch dependency; the installed copy imports and reports that version."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")


def pip(*args):
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
                          capture_output=True, text=True)


@unittest.skipUnless(os.environ.get("DLFS_PROJECT_VERSION"), "DLFS_PROJECT_VERSION not set (run under meson test)")
class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if pip("--version").returncode != 0:
            raise unittest.SkipTest("pip is not installed (python3-pip)")
        cls.tmp = tempfile.mkdtemp(prefix="dlfs-pkg-")
        # Build from a copy: an in-tree build would leave build/ and *.egg-info in python/.
        src = shutil.copytree(SRC, os.path.join(cls.tmp, "src"), ignore=shutil.ignore_patterns("__pycache__"))
        r = pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", os.path.join(cls.tmp, "dist"), src)
        if r.returncode != 0:
            raise AssertionError(f"pip wheel python/ failed:\n{r.stdout}\n{r.stderr}")
        wheels = os.listdir(os.path.join(cls.tmp, "dist"))
        assert len(wheels) == 1, wheels
        cls.wheel = os.path.join(cls.tmp, "dist", wheels[0])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def metadata(self):
        with zipfile.ZipFile(self.wheel) as z:
            name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            return z.read(name).decode(), z.namelist()

    def test_wheel_has_the_project_version_and_every_module(self):
        meta, names = self.metadata()
        version = os.environ["DLFS_PROJECT_VERSION"]
        self.assertIn(f"\nVersion: {version}\n", meta, "python/pyproject.toml's version is not meson.build's")
        self.assertIn("Requires-Dist: torch", meta)
        self.assertIn("Provides-Extra: torch", meta)
        modules = sorted(f for f in os.listdir(os.path.join(SRC, "dlfs")) if f.endswith(".py"))
        for m in modules:
            self.assertIn(f"dlfs/{m}", names)

    def test_installed_copy_imports_with_that_version(self):
        target = os.path.join(self.tmp, "site")
        r = pip("install", "--no-deps", "--no-index", "--target", target, self.wheel)
        self.assertEqual(r.returncode, 0, r.stderr)
        env = dict(os.environ, PYTHONPATH=target)
        out = subprocess.run([sys.executable, "-c", "import dlfs; print(dlfs.__file__); print(dlfs.__version__)"],
                             capture_output=True, text=True, env=env, cwd=self.tmp)
        self.assertEqual(out.returncode, 0, out.stderr)
        path, version = out.stdout.split()
        self.assertTrue(path.startswith(target), path)
        self.assertEqual(version, os.environ["DLFS_PROJECT_VERSION"])


class MesonInstallTest(unittest.TestCase):
    def test_meson_installs_every_module(self):
        """python/meson.build names the modules `meson install` installs (and the Debian package
        python3-dlfs ships): every module of the client, and nothing else."""
        with open(os.path.join(SRC, "meson.build")) as f:
            listed = set(re.findall(r"'dlfs/([A-Za-z0-9_]+\.py)'", f.read()))
        modules = {f for f in os.listdir(os.path.join(SRC, "dlfs")) if f.endswith(".py")}
        self.assertEqual(listed, modules, "python/meson.build's install_sources list is not python/dlfs/*.py")


if __name__ == "__main__":
    unittest.main()
