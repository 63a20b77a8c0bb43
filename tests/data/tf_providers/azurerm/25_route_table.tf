provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "rt" {
  name     = "rg-rt"
  location = "westeurope"
}

resource "azurerm_route_table" "main" {
  name                = "rt-main"
  location            = azurerm_resource_group.rt.location
  resource_group_name = azurerm_resource_group.rt.name

  route {
    name                   = "to-firewall"
    address_prefix         = "0.0.0.0/0"
    next_hop_type          = "VirtualAppliance"
    next_hop_in_ip_address = "10.0.0.4"
  }
}

resource "azurerm_subnet_route_table_association" "app" {
  subnet_id      = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-rt/providers/Microsoft.Network/virtualNetworks/vnet/subnets/app"
  route_table_id = azurerm_route_table.main.id
}
