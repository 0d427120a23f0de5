"""seed= and resume_from= of the view classes (dlfs/resume.py): the paths
they read, and clear errors for what is not a resume point."""
import os
import tempfile
import unittest

from dlfs.index import view_path
from dlfs.resume import consumed_name, resume_spec
from dlfs.view import TarView
from viewfixture import make_view, sample_members


class ResumeSpecTest(unittest.TestCase):
    def test_forms(self):
        self.assertEqual(resume_spec((4, 7)), (4, [7, 7, 7, 7]))
        self.assertEqual(resume_spec([3, [1, 2, 3]]), (3, [1, 2, 3]))
        self.assertEqual(resume_spec({"world_size": 2, "consumed": [5]}), (2, [5, 5]))

    def test_errors_name_the_problem(self):
        for bad, words in (((4, [1, 2]), "one count (every rank) or 4 counts"),
                           ((0, 3), "world size must be an integer in [1, 65535]"),
                           ((2, -1), "non-negative"),
                           ((2, [1, "x"]), "non-negative"),
                           ((2, 1.5), "one count"),
                           (5, "resume_from must be (world_size, consumed counts)"),
                           ({"world": 2, "consumed": 1}, "resume_from must be {'world_size'")):
            with self.assertRaises(ValueError) as e:
                resume_spec(bad)
            self.assertIn(words, str(e.exception), bad)

    def test_names(self):
        self.assertEqual(consumed_name([3, 3, 3]), "3")
        self.assertEqual(consumed_name([5, 4, 4, 4]), "5,4*3")
        self.assertEqual(consumed_name([1, 2, 2, 1]), "1,2*2,1")

    def test_paths(self):
        self.assertEqual(view_path("/m/d", 2, 3, 1), "/m/d/epochs/2/3/1")
        self.assertEqual(view_path("/m/d", 2, 3, 1, seed=9), "/m/d/seeds/9/epochs/2/3/1")
        self.assertEqual(view_path("/m/d", 2, 3, 1, resume_from=(4, [5, 4, 4, 4])),
                         "/m/d/epochs/2/4/resume/5,4*3/3/1")
        self.assertEqual(view_path("/m/d", 0, 1, 0, seed=2**64 - 1, resume_from=(2, 0)),
                         f"/m/d/seeds/{2**64 - 1}/epochs/0/2/resume/0/1/0")
        for seed in (-1, 2**64, "5", True):
            with self.assertRaises(ValueError):
                view_path("/m/d", 0, 1, 0, seed=seed)


class ResumeViewTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = tmp.name

    def test_reads_the_resume_path(self):
        # A resume view laid out where dlfsd serves it.
        members = sample_members(10, seed=3)
        resume_root = os.path.join(self.root, "epochs", "1", "4", "resume", "2,1*3")
        make_view(resume_root, 0, 3, 2, members)  # <root>/epochs/0/3/2.* below resume_root
        os.rename(os.path.join(resume_root, "epochs", "0", "3"), os.path.join(resume_root, "3"))
        view = TarView(self.root, 1, 2, 3, resume_from=(4, [2, 1, 1, 1]), zero_copy=False)
        self.assertEqual(view.path, os.path.join(resume_root, "3", "2.tar"))
        self.assertEqual([name for name, _ in members], [n for n in view.index.names])
        self.assertEqual(len(list(view.samples())), len(members))

    def test_a_missing_resume_view_says_why(self):
        make_view(self.root, 1, 4, 0, sample_members(6, seed=1))  # the first run's views: 6 samples each
        try:
            os.setxattr(os.path.join(self.root, "epochs", "1", "4", "0.index"), "user.dlfs.samples", b"6")
            has_xattr = True
        except OSError:
            has_xattr = False
        with self.assertRaises(FileNotFoundError) as e:
            TarView(self.root, 1, 0, 3, resume_from=(4, [7, 1, 1, 1]), zero_copy=False)
        self.assertIn("no resume view", str(e.exception))
        if has_xattr:
            self.assertIn("rank 0 of 4 consumed 7 samples, but the views of", str(e.exception))


if __name__ == "__main__":
    unittest.main()
