// main() for the test binaries; Catch2 itself is catch_impl.cpp.
int run_catch_session(int argc, char** argv);

int main(int argc, char** argv) { return run_catch_session(argc, argv); }
