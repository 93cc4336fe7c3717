"""Analyses generated C sources with lizard: lizard issue #253 reported analysis ten times
slower in 1.16.1 than in 1.15.7."""

import lizard

FILES = 16


def source(n):
    funcs = []
    for i in range(40):
        funcs.append(
            f"int f{n}_{i}(int a, int b) {{\n"
            "    int s = 0;\n"
            "    for (int k = 0; k < a; k++) {\n"
            "        if (k % 3 == 0 && b > 2) { s += k; } else if (k > b) { s -= 1; }\n"
            "    }\n"
            "    return s;\n"
            "}\n"
        )
    return "\n".join(funcs)


total = 0
for n in range(FILES):
    info = lizard.analyze_file.analyze_source_code(f"gen{n}.c", source(n))
    total += len(info.function_list)
assert total == 40 * FILES
print(lizard.version)
