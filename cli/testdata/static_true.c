// A statically linked program that does nothing: forkguard run names it as unwatched.
int main() { return 0; }
