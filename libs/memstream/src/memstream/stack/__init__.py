"""Starting the embedded servers (broker, graph server) as child processes that die with
their parent."""
