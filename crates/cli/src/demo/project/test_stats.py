from stats import mean, spread

checks = [
    ("mean([2, 4, 6]) == 4", mean([2, 4, 6]) == 4),
    ("mean([5]) == 5", mean([5]) == 5),
    ("spread([3, 9, 1]) == 8", spread([3, 9, 1]) == 8),
]
for name, ok in checks:
    print(("ok    " if ok else "FAIL  ") + name)
raise SystemExit(0 if all(ok for _, ok in checks) else 1)
