// The strata binary.
#include <cstdio>
int main() { std::puts("strata"); return 0; }
