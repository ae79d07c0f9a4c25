"""What an agent is given and gives back: the Turn, the Proposal and the Policy interface, and the
strategy lenses that specialise agents. Below agents, context and the orchestrator, which all use it."""
