"""The fixed dev/test splits of the learning protocol (issue 28), kept in protocol-splits.json.

    python benchmarks/protocol_splits.py           # writes protocol-splits.json (or checks it is current)
    python benchmarks/protocol_splits.py --check    # only checks: exit 1 when it is stale or unsound

Each game's held-out set (an instances file of its folder, grown by its seeded generator:
``in/instances_protocol.json`` and the like) is split into a *dev* part, on which every
variant may be tuned, and a *test* part, played once per final configuration. The split
is drawn per experiment (so both parts keep the experiments' mix) over clusters of items
that are not independent — a referencegame target at its three grid positions is one
cluster and lands wholly in dev or in test — with a fixed seed. An item id is
``<experiment>/<game_id>``, as in the instances file and the results folders
(``<experiment>/instance_<game_id>``).

The file lists every item id: anyone can recompute a result from the per-item scores
without this code. :func:`check_splits` proves what the protocol promises: no item in both
parts, no held-out item (by its content: target word, slot values, problem, target grid)
in the game's training instances.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
GAMES_DIR = REPO_ROOT / "playpen" / "games" / "builtin"
SPLITS_FILE = Path(__file__).resolve().parent / "protocol-splits.json"
SEED = 28
DEV_SHARE = 1 / 3
# game -> (its folder, held-out instances file, training instances file, what identifies an
# item's content, the instance field that clusters items: None = every item its own cluster)
GAMES = {
    "taboo": ("taboo", "instances_protocol", "instances_train", "target_word", None),
    "privateshared": ("privateshared", "instances_protocol", "instances_train", "slots", None),
    "arith_solver": ("proposer_solver", "instances_solver_protocol", "instances_solver_train", "problem", None),
    "referencegame": ("referencegame", "instances", "instances_train", "target_grid", "target_name"),
}


def read_instances(game: str, stem: str) -> dict:
    folder = GAMES[game][0]
    return json.loads((GAMES_DIR / folder / "in" / f"{stem}.json").read_text(encoding="utf-8"))


def items_of(instances: dict) -> list[tuple[str, dict]]:
    """(item id, instance) of every instance, in file order."""
    return [(f"{e['name']}/{i['game_id']}", i) for e in instances["experiments"] for i in e["game_instances"]]


def content_key(game: str, instance: dict) -> str:
    return json.dumps(instance[GAMES[game][3]], sort_keys=True)


def split_game(game: str, seed: int = SEED, dev_share: float = DEV_SHARE) -> dict:
    """One game's entry: its files, the dev and test item ids and (where items cluster)
    item id -> cluster id."""
    folder, held_out, train, key, cluster_field = GAMES[game]
    instances = read_instances(game, held_out)
    rng = random.Random(f"{seed}-{game}")
    dev, test, clusters = [], [], {}
    for experiment in instances["experiments"]:
        members: dict[str, list[str]] = {}
        for instance in experiment["game_instances"]:
            item = f"{experiment['name']}/{instance['game_id']}"
            cluster = f"{experiment['name']}/{instance[cluster_field]}" if cluster_field else item
            members.setdefault(cluster, []).append(item)
            if cluster_field:
                clusters[item] = cluster
        order = sorted(members)
        rng.shuffle(order)
        cut = round(len(order) * dev_share)
        dev += [i for c in order[:cut] for i in members[c]]
        test += [i for c in order[cut:] for i in members[c]]
    entry = {"instances": held_out, "train_instances": train, "content": key,
             "dev": sorted(dev, key=_order), "test": sorted(test, key=_order)}
    if clusters:
        entry["clusters"] = clusters
    return entry


def _order(item: str):
    experiment, _, game_id = item.rpartition("/")
    return experiment, int(game_id)


def build_splits(seed: int = SEED, dev_share: float = DEV_SHARE) -> dict:
    return {"seed": seed, "dev_share": round(dev_share, 4),
            "item_id": "<experiment>/<game_id> of the game's instances file",
            "games": {game: split_game(game, seed, dev_share) for game in GAMES}}


def load_splits(path: Path = SPLITS_FILE) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def check_splits(splits: dict) -> list[str]:
    """What is wrong with `splits` (empty: sound): an item in dev and test, an item that is
    not in the held-out file, a held-out item whose content is a training instance's."""
    problems = []
    for game, entry in splits["games"].items():
        held_out = dict(items_of(read_instances(game, entry["instances"])))
        train = {content_key(game, i) for _, i in items_of(read_instances(game, entry["train_instances"]))}
        dev, test = set(entry["dev"]), set(entry["test"])
        problems += [f"{game}: {i} is in dev and in test" for i in sorted(dev & test)]
        for item in sorted(dev | test):
            if item not in held_out:
                problems.append(f"{game}: {item} is not in in/{entry['instances']}.json")
            elif content_key(game, held_out[item]) in train:
                problems.append(f"{game}: {item} is a training instance too ({entry['content']})")
        clusters = entry.get("clusters", {})
        split_clusters = {clusters[i] for i in dev if i in clusters} & {clusters[i] for i in test if i in clusters}
        problems += [f"{game}: cluster {c} is in dev and in test" for c in sorted(split_clusters)]
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the file: current and sound")
    args = parser.parse_args(argv)
    fresh = build_splits()
    problems = check_splits(fresh)
    if problems:
        print("protocol_splits.py: " + "; ".join(problems), file=sys.stderr)
        return 1
    if SPLITS_FILE.exists():
        if load_splits() != fresh:  # the splits are fixed: a changed held-out file is a new protocol
            print(f"protocol_splits.py: {SPLITS_FILE} differs from the splits the instance files give now; "
                  f"results on it are not comparable: remove it deliberately to draw new splits", file=sys.stderr)
            return 1
        print(f"{SPLITS_FILE}: current")
        return 0
    if args.check:
        print(f"protocol_splits.py: {SPLITS_FILE} does not exist", file=sys.stderr)
        return 1
    SPLITS_FILE.write_text(json.dumps(fresh, indent=1) + "\n", encoding="utf-8")
    for game, entry in fresh["games"].items():
        print(f"{game:<14} dev {len(entry['dev']):>3}  test {len(entry['test']):>3}  (in/{entry['instances']}.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
