provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "main" {
  name     = "rg-aks"
  location = "westeurope"
}

resource "azurerm_kubernetes_cluster" "platform" {
  name                              = "aks-platform"
  resource_group_name               = azurerm_resource_group.main.name
  location                          = azurerm_resource_group.main.location
  dns_prefix                        = "platform"
  role_based_access_control_enabled = true

  default_node_pool {
    name       = "system"
    node_count = 3
    vm_size    = "Standard_D4s_v5"
  }

  identity {
    type = "SystemAssigned"
  }
}
