# Comparisons and logical ops (bool results, no gradient) and where.


def eq(input, other):
    raise NotImplementedError
ne = lt = le = gt = ge = logical_and = logical_or = logical_xor = logical_not = bitwise_not = eq
