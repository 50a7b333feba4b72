"""`zoo list`: the presets, each with its one-line description."""


def add_parser(commands):
    commands.add_parser(
        "list",
        help="list the presets",
        description="List the presets, each with its one-line description: the names "
        "`zoo train PRESET` takes (docs/recipes.md describes each recipe).",
    )


def command(args):
    from zoo import registry

    descriptions = registry.presets()
    width = max(map(len, descriptions))
    for name, description in descriptions.items():
        print(f"{name:<{width}}  {description}")
