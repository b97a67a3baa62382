from assets.editing.prompts import libraries
from assets.shared.data_profile import data_section

SYSTEM = "You turn research ideas into precise, minimal code change plans for one Python file."


def plan(code: str, metric: str, name: str, title: str, experiment: str, summary: str,
         definitions: str = "", data: str = "") -> list[dict]:
    """`definitions`: the file's functions, classes and top-level code, one per line; the plan's
    location names those it changes (the patch is asked for exactly them). `data`: the topic
    folder's data profile (assets/shared/data_profile.py), shown as a Data section."""
    where = (f"The file's parts:\n{definitions}\n\n" if definitions else "")
    libs = libraries(code)
    written = ("Python with " + (", ".join(libs[:-1]) + " and " + libs[-1] if len(libs) > 1 else libs[0]) if libs
               else "plain Python (the standard library)")
    stack = (f"The file is written in {written}: plan the change with the libraries it already uses where they "
             "serve, never a switch to another framework.")
    # what every idea of the round shares (the file, its parts, the data) comes before the idea, so
    # the server reads it once and reuses it for the next idea's plan
    return [
        {"role": "system", "content": SYSTEM + f" {stack}\n\nThe file:\n```python\n{code}\n```"},
        {"role": "user", "content": (
            where + (f"{data_section(data)}\n" if data.strip() else "")
            + f"Idea {name}: {title}\n{summary}\nSuggested experiment: {experiment}\n\n"
            f"Write the plan: the concrete changes (1-4 items), each naming the function, class or "
            f"top-level variable it changes; the location: the names of the parts it changes, from the list; "
            f"how {metric} is evaluated (keep the script's evaluation and final_info.json unchanged), "
            "and the expected effect.")},
    ]
