/* GENERATED from lucid/_core/optable.py by setup.py -- do not edit.
 * LV_OP_X(name, float fn, double fn, gradient expr in g and x) -- saves the input
 * LV_OP_Y(name, float fn, double fn, gradient expr in g and y) -- saves the output */
#define LUCID_UNARY_OPS \
    LV_OP_X(erf, erff, erf, g * (T)1.1283791670955126 * EXP(-(x * x))) \
    LV_OP_Y(exp, expf, exp, g * y) \
    LV_OP_X(log2, log2f, log2, g / (x * (T)0.6931471805599453)) \
    LV_OP_X(log, logf, log, g / x) \

/* end of LUCID_UNARY_OPS */
