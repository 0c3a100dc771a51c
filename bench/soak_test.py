#!/usr/bin/python3
"""Tests of bench/soak.py's growth judge on made-up samples: an hour of programs whose
counts depend on the phase they are sampled in passes, growth from process to process and
a long-lived process's leak do not."""
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak  # noqa: E402

MIB = 1024


def hour(client, server=None, every=5, minutes=60, seed=7):
    """Samples every `every` s: short-lived clients, one after another (each 35-45 s, its
    first half small, its second large), `client(t, phase)` -> (rss_kb, fds, threads); a
    long-lived server from t = 0 if `server(t)` -> (rss_kb, fds, threads) is given."""
    rng = random.Random(seed)
    lives, born = [], 0.0
    while born < minutes * 60:
        life = rng.uniform(35, 45)
        lives.append((born, life))
        born += life + rng.uniform(0.5, 1.5)
    samples = []
    for t in range(every, minutes * 60 + 1, every):
        procs = {}
        for pid, (b, life) in enumerate(lives, start=1000):
            if b <= t < b + life:
                r, f, th = client(t, "large" if t - b >= life / 2 else "small")
                procs[str(pid)] = {"name": "client", "start": int(b * 100), "rss_kb": r,
                                   "fds": f, "threads": th}
        if server:
            r, f, th = server(t)
            procs["1"] = {"name": "server", "start": 0, "rss_kb": r, "fds": f, "threads": th}
        samples.append({"t": t, "procs": procs})
    return samples


def phased(t, phase):
    return (8 * MIB, 12, 4) if phase == "small" else (48 * MIB, 17, 5)


class GrowthJudge(unittest.TestCase):
    def test_phases_are_not_growth(self):
        # Medians of the same samples flagged a third of these hours (8 MiB in one window,
        # 48 in the other).
        for seed in range(20):
            problems, table = soak.growth(hour(phased, server=lambda t: (20 * MIB, 9, 3),
                                               seed=seed))
            self.assertEqual(problems, [], seed)
            self.assertTrue(any(r[0] == "client (all, mean)" for r in table), table)

    def test_growth_from_process_to_process(self):
        grows = lambda t, ph: (phased(t, ph)[0] + t * 20 * MIB // 3600, *phased(t, ph)[1:])
        problems, _ = soak.growth(hour(grows))
        self.assertEqual(len(problems), 1, problems)
        self.assertTrue(problems[0].startswith("client: mean of "), problems)

    def test_descriptors_and_threads_from_process_to_process(self):
        fds = lambda t, ph: (phased(t, ph)[0], phased(t, ph)[1] + t * 4 // 3600, phased(t, ph)[2])
        self.assertEqual(len(soak.growth(hour(fds))[0]), 1)
        thr = lambda t, ph: (*phased(t, ph)[:2], phased(t, ph)[2] + t * 3 // 3600)
        self.assertEqual(len(soak.growth(hour(thr))[0]), 1)

    def test_long_lived_sessions_are_not_growth(self):
        # A server with sessions' descriptors and threads open part of the time, in the
        # shares of the integrity server's 720 samples of an hour's soak, where its first
        # sample after a minute (28 descriptors, 5 threads) and its last (29, 6), compared
        # alone, were taken for growth.
        fds = [24] * 1 + [25] * 44 + [26] * 556 + [27] * 35 + [28] * 38 + [29] * 46
        threads = [2] * 41 + [3] * 559 + [4] * 36 + [5] * 38 + [6] * 46
        for seed in range(20):
            rng = random.Random(seed)
            busy = lambda t: (190 * MIB + rng.randrange(90 * MIB), rng.choice(fds),
                              rng.choice(threads))
            self.assertEqual(soak.growth(hour(phased, server=busy, seed=seed))[0], [], seed)

    def test_long_lived_leak(self):
        leak = lambda t: (20 * MIB, 9 + (t > 1800), 3)  # one descriptor kept from 30 min on
        problems, _ = soak.growth(hour(phased, server=leak))
        self.assertEqual(len(problems), 1, problems)
        self.assertTrue(problems[0].startswith("server pid 1: mean of "), problems)
        thread = lambda t: (20 * MIB, 9, 3 + (t > 1800))
        self.assertEqual(len(soak.growth(hour(phased, server=thread))[0]), 1)
        rss = lambda t: (100 * MIB + t * 40 * MIB // 3600, 9, 3)
        self.assertEqual(len(soak.growth(hour(phased, server=rss))[0]), 1)

    def test_short_run_judges_nothing(self):
        grows = lambda t, ph: (phased(t, ph)[0] + t * 200 * MIB // 3600, *phased(t, ph)[1:])
        self.assertEqual(soak.growth(hour(grows, minutes=15))[0], [])


if __name__ == "__main__":
    unittest.main()
