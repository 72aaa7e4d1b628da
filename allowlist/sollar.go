package allowlist

// parseSollar reads a Sollar mini app's manifest.json: manifest_version 1,
// id, version, and network.connect. Fields egressd does not use are not
// checked.
func parseSollar(top fields, m *Manifest, rules *Rules) {
	top.literalOne("manifest_version")
	parseIdentity(top, m)
	network, ok := top.object("network")
	if !ok {
		return
	}
	network.onlyKeys("connect")
	connect, ok := network.array("connect")
	if !ok {
		if !network.has("connect") {
			top.ps.errorf(network.at("connect"), "is required in network")
		}
		return
	}
	parseEntries(connect, network.at("connect"), m, rules, top.ps)
}
